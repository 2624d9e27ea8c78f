"""The reusable persistence-backend contract suite: the behaviours every backend must show.

Plug a backend in with a harness and a test class, in the backend's own test module::

    import pytest
    from plugins.session_persistence.testing.contract import BackendContract, BackendHarness

    class MyHarness(BackendHarness):
        name = "mybackend"

        def __init__(self, tmp_path):
            self.root = tmp_path

        def new_backend(self):                      # a fresh instance over the same storage
            return MyBackend(self.root)

        def child_factory(self):                    # the same, built in a child process
            return "my_package.backend:MyBackend", {"root": str(self.root)}

        async def tear_tail(self, session_id): ...  # leave the log as a crash in its last write
        async def corrupt_committed(self, session_id): ...  # damage an event before a turn/end
        async def set_format_version(self, session_id, version): ...  # rewrite header version

    class TestMyBackendContract(BackendContract):
        @pytest.fixture
        def harness(self, tmp_path):
            return MyHarness(tmp_path)

Every `test_*` method of `BackendContract` then runs against the backend (on asyncio and trio;
an asyncio-only backend overrides the `anyio_backend` fixture in its module). The suite mounts
the real `sessions` plugin and the `sessionPersistence` service over the backend wrapped in a
`FaultInjector`, drives the batching window with a `FakeClock`, and for behaviour 13 runs real
child processes (`python -m plugins.session_persistence.testing.child hold <spec>`). A missing
fixture log fails the copy-through test.
"""

from __future__ import annotations

import abc
import json
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from plugins.session import SessionStore
from plugins.session.jsonutil import loads
from plugins.session.repair import interrupted_turn_closers

from ..backend import JsonObject, Owner, PersistenceBackend
from ..errors import (
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    StaleWriterError,
)
from . import (
    CWD,
    FIXTURE_NAMES,
    FIXTURES,
    T0,
    complete_turn,
    event,
    meta,
    open_step_turn,
    open_tool_turn,
    read_fixture,
    replay,
    running,
    store,
    texts,
)

__all__ = ["BackendContract", "BackendHarness", "holding"]


class BackendHarness(abc.ABC):
    """What the contract suite needs from a backend's tests (see the module docstring)."""

    #: A short label for messages, e.g. "jsonl-raw".
    name: str = "backend"
    #: False when the backend cannot be shared between processes (behaviour 13 is skipped).
    cross_process: bool = True

    @abc.abstractmethod
    def new_backend(self) -> PersistenceBackend:
        """A fresh backend instance over the same storage as every other instance."""

    @abc.abstractmethod
    def child_factory(self) -> tuple[str, dict[str, Any]]:
        """`("module:callable", kwargs)`: how a child process builds the same backend
        (`callable(**kwargs)`; kwargs must be JSON)."""

    @abc.abstractmethod
    async def tear_tail(self, session_id: str) -> None:
        """Leave the stored log as a crash inside its last write would: the last stored event
        is lost (half written to a file; never committed to a database); every earlier batch
        survives."""

    @abc.abstractmethod
    async def corrupt_committed(self, session_id: str) -> None:
        """Damage a stored event that a later `turn/end` follows (committed corruption)."""

    @abc.abstractmethod
    async def set_format_version(self, session_id: str, version: int) -> None:
        """Rewrite the stored header's format version."""


# -- the contract ---------------------------------------------------------------------------------


@asynccontextmanager
async def holding(
    harness: BackendHarness, session_id: str, events: list[JsonObject]
) -> AsyncIterator[anyio.abc.Process]:
    """A child process owning live session `session_id` with `events` flushed (see `child`);
    killed on exit."""
    factory, kwargs = harness.child_factory()
    spec: JsonObject = {"factory": factory, "kwargs": kwargs, "session": session_id, "cwd": CWD}
    spec["events"] = events
    command = [sys.executable, "-m", "plugins.session_persistence.testing.child", "hold"]
    child = await anyio.open_process([*command, json.dumps(spec)], stderr=None)
    try:
        assert child.stdout is not None
        with anyio.fail_after(60):
            line = b""
            while not line.endswith(b"\n"):
                line += await child.stdout.receive(1)
        assert line == b"ready\n", f"child failed: {line!r}"
        yield child
    finally:
        if child.returncode is None:
            child.kill()
        with anyio.CancelScope(shield=True):
            await child.aclose()


_REFUSED_VALUES: list[Any] = [
    (1, 2),
    {1, 2},
    b"bytes",
    float("nan"),
    float("inf"),
    -0.0,
    2**53,
    {1: "non-string key"},
    Path("/x"),
]
_BAD_COUNTS: list[Any] = [-1, 1.5, "1", 2**53, None]
_LOSSY_BATCH = (
    "session event batch is not losslessly JSON-serializable because it contains "
    "non-JSON-serializable data"
)


class BackendContract:
    """docs/persistence.md: the behaviours every persistence backend must show (`test_bNN_*`)."""

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def harness(self) -> BackendHarness:
        raise NotImplementedError("a backend's test class overrides the `harness` fixture")

    # 1 ------------------------------------------------------------------------------------------

    async def test_b01_create_append_then_fresh_instance_load(
        self, harness: BackendHarness
    ) -> None:
        events = complete_turn(0)
        async with running(harness.new_backend()) as w:
            await store(w, "s1", events[:2], events[2:], agentPreset="coder")
        async with running(harness.new_backend()) as w:
            log = await w.service.load("s1")
        assert log.header == {
            "version": 0,
            "id": "s1",
            "createdAt": 1000,
            "cwd": CWD,
            "delegationDepth": 0,
            "agentPreset": "coder",
        }
        assert texts(log.events) == texts(events)

    # 2 ------------------------------------------------------------------------------------------

    @pytest.mark.parametrize("created_at", [*_BAD_COUNTS, True])
    async def test_b02_bad_created_at_leaves_the_id_free(
        self, harness: BackendHarness, created_at: Any
    ) -> None:
        async with running(harness.new_backend()) as w:
            with pytest.raises(TypeError) as caught:
                await w.service.create({"id": "s1", "createdAt": created_at})
            assert str(caught.value) == (
                "session metadata createdAt must be a non-negative safe integer"
            )
            await w.service.create(meta("s1"))

    async def test_b02_duplicate_and_stored_creates_are_refused(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("s1"))
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.create(meta("s1"))
            assert str(caught.value) == 'session "s1" already exists in this backend'
            await w.service.append("s1", complete_turn(0))
        async with running(harness.new_backend()) as w:
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.create(meta("s1"))
        assert str(caught.value) == (
            'session "s1" already has a persisted log on disk; load/resume it instead of creating'
        )

    async def test_b02_seq_mismatch_and_mid_batch_gap_store_nothing(
        self, harness: BackendHarness
    ) -> None:
        events = complete_turn(0)
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("s1"))
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.append("s1", events[1:3])
            assert str(caught.value) == 'append seq mismatch for "s1": expected 0 at index 0, got 1'
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.append("s1", [events[0], events[2]])
            assert str(caught.value) == 'append seq mismatch for "s1": expected 1 at index 1, got 2'
            assert await w.backend.read_stored_revision("s1") is None
            assert await w.service.list() == []
            assert w.backend.appends == []

    @pytest.mark.parametrize("value", _REFUSED_VALUES, ids=repr)
    async def test_b02_refused_values_store_nothing(
        self, harness: BackendHarness, value: Any
    ) -> None:
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("s1"))
            bad = event(0, "turn/start", {"turn": 1, "extra": [value]})
            with pytest.raises(TypeError) as caught:
                await w.service.append("s1", [bad])
            assert str(caught.value) == _LOSSY_BATCH
            with pytest.raises(TypeError) as caught:
                await w.service.create(meta("s2", extra=value))
            assert str(caught.value) == "session metadata must be losslessly JSON-serializable"
            assert await w.backend.read_stored_revision("s1") is None
            assert w.backend.appends == []

    async def test_b02_unappended_sessions_are_unlisted_and_empty_batches_are_noops(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("s1"))
            await w.service.append("s1", [])
            await w.service.append("never-created", [])
            assert await w.service.list() == []
            assert await w.service.list_snapshots() == []
            assert w.backend.appends == []

    # 3 ------------------------------------------------------------------------------------------

    async def test_b03_append_is_durable_on_return_and_immune_to_mutation(
        self, harness: BackendHarness
    ) -> None:
        events = complete_turn(0)
        original = texts(events)
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("s1"))
            await w.service.append("s1", events)
            events[0]["data"]["turn"] = 99
            events[1]["data"]["content"].append({"type": "text", "text": "late"})
            reader = harness.new_backend()
            try:
                stored = await reader.load_stored("s1")
            finally:
                await reader.aclose()
            assert stored is not None
            assert texts(stored.events) == original

    async def test_b03_a_fresh_instance_adopts_and_continues(self, harness: BackendHarness) -> None:
        first, second = complete_turn(0), complete_turn(6, 2)
        async with running(harness.new_backend()) as w:
            await store(w, "s1", first)
        async with running(harness.new_backend()) as w:
            await w.service.append("s1", second)
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.append("s1", [event(5, "session/end-seed", {})])
            assert (
                str(caught.value) == 'append seq mismatch for "s1": expected 12 at index 0, got 5'
            )
        async with running(harness.new_backend()) as w:
            assert texts((await w.service.load("s1")).events) == texts(first + second)

    # 4 ------------------------------------------------------------------------------------------

    async def test_b04_inspect_repairs_in_memory_load_commits(
        self, harness: BackendHarness
    ) -> None:
        stored = complete_turn(0) + open_step_turn(6, 2)
        closers = [
            {"type": "step/end", "seq": 9, "time": T0 + 8, "data": {"turn": 2, "step": 1}},
            {
                "type": "turn/end",
                "seq": 10,
                "time": T0 + 8,
                "data": {"turn": 2, "reason": {"kind": "interrupted"}},
            },
        ]
        async with running(harness.new_backend()) as w:
            await store(w, "s1", stored)
            before = await w.backend.read_stored_revision("s1")
            inspected = await w.service.inspect("s1")
            assert texts(inspected.events) == texts(stored + closers)
            assert await w.backend.read_stored_revision("s1") == before
            assert texts(await w.service.read_from("s1", 0)) == texts(stored)
            loaded = await w.service.load("s1")
            assert texts(loaded.events) == texts(stored + closers)
            assert await w.backend.read_stored_revision("s1") != before
            await w.service.append("s1", complete_turn(11, 3))
        async with running(harness.new_backend()) as w:
            assert texts((await w.service.load("s1")).events) == texts(
                stored + closers + complete_turn(11, 3)
            )

    # 5 ------------------------------------------------------------------------------------------

    @pytest.mark.parametrize("started", [False, True], ids=["not-started", "outcome-unknown"])
    async def test_b05_exact_tool_closers(self, harness: BackendHarness, started: bool) -> None:
        stored = open_tool_turn(0, started=started)
        seq, time = len(stored), stored[-1]["time"]
        if started:
            error = '{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}'
            text = (
                "The tool call was interrupted after it was recorded, but no result was durably "
                "recorded. Its outcome is unknown. Decide whether to retry from the tool "
                "semantics: retry only if the operation is read-only or idempotent; if it may "
                "have side effects, first verify external state or ask the user. Do not retry "
                "blindly."
            )
            cite = ',"sourceEventSeqs":[4]'
        else:
            error = '{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}'
            text = (
                "The tool call was interrupted before the Harness recorded it as started. "
                "Retry it if it is still needed."
            )
            cite = ""
        expected = [
            f'{{"type":"tool/result","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,'
            f'"message":{{"id":"interrupted-tool-result-call-1-{seq}","role":"user",'
            f'"source":{{"kind":"tool","callId":"call-1"}},"content":[{{"type":"tool-result",'
            f'"toolCallId":"call-1","isError":true,"content":[{{"type":"text","text":"{text}"}}]}}]}},'
            f'"error":{error}}},"surfaceOp":"append"{cite}}}',
            f'{{"type":"step/end","seq":{seq + 1},"time":{time},"data":{{"turn":1,"step":1}}}}',
            f'{{"type":"turn/end","seq":{seq + 2},"time":{time},'
            f'"data":{{"turn":1,"reason":{{"kind":"interrupted"}}}}}}',
        ]
        async with running(harness.new_backend()) as w:
            await store(w, "s1", stored)
            await w.service.load("s1")
        async with running(harness.new_backend()) as w:
            assert texts(await w.service.read_from("s1", seq)) == expected

    # 6 ------------------------------------------------------------------------------------------

    async def test_b06_not_found(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            for call in (
                w.service.load("nope"),
                w.service.inspect("nope"),
                w.service.prepare("nope"),
                w.service.read_from("nope", 0),
                w.service.append("nope", complete_turn(0)),
            ):
                with pytest.raises(SessionPersistenceError) as caught:
                    await call
                assert str(caught.value) == 'session "nope" not found'

    async def test_b06_read_from(self, harness: BackendHarness) -> None:
        stored = complete_turn(0) + open_step_turn(6, 2)
        async with running(harness.new_backend()) as w:
            await store(w, "s1", stored)
            assert texts(await w.service.read_from("s1", 0)) == texts(stored)
            assert texts(await w.service.read_from("s1", 7)) == texts(stored[7:])
            assert await w.service.read_from("s1", len(stored)) == []
            assert await w.service.read_from("s1", 1000) == []
            for bad, shown in zip(_BAD_COUNTS, ["-1", "1.5", "1", str(2**53), "null"], strict=True):
                with pytest.raises(TypeError) as caught:
                    await w.service.read_from("s1", bad)
                assert str(caught.value) == (
                    f"readFrom fromSeq must be a non-negative safe integer, got {shown}"
                )

    async def test_b06_revisions(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "s1", complete_turn(0) + open_step_turn(6, 2))
            await store(w, "s2", complete_turn(0))

            async def revisions() -> dict[str, str]:
                snaps = await w.service.list_snapshots()
                return {snap.header["id"]: snap.revision for snap in snaps}

            first = await revisions()
            assert first == await revisions()
            assert first["s1"] != first["s2"]
            await w.service.append("s2", complete_turn(6, 2))
            second = await revisions()
            assert second["s1"] == first["s1"]
            assert second["s2"] != first["s2"]
            await w.service.load("s1")  # commits the repair
            third = await revisions()
            assert third["s1"] != second["s1"]
            assert third["s2"] == second["s2"]

    async def test_b06_header_fields_and_list_order(self, harness: BackendHarness) -> None:
        full = meta(
            "child",
            2000,
            parentSession="parent",
            seedLength=3,
            origin="subagent",
            delegationDepth=2,
            agentPreset="reviewer",
        )
        async with running(harness.new_backend()) as w:
            for session_id, created_at in (("b", 3000), ("a", 3000), ("z", 1000)):
                await store(w, session_id, complete_turn(0), created_at=created_at)
            await w.service.create(full)
            await w.service.append("child", complete_turn(0))
        async with running(harness.new_backend()) as w:
            headers = await w.service.list()
            assert [h["id"] for h in headers] == ["z", "child", "a", "b"]
            assert headers[1] == {"version": 0, **full}
            assert (await w.service.load("child")).header == {"version": 0, **full}

    # 7 ------------------------------------------------------------------------------------------

    @pytest.mark.parametrize("version", [1, 7])
    async def test_b07_newer_format_versions_are_refused(
        self, harness: BackendHarness, version: int
    ) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "s1", complete_turn(0))
        await harness.set_format_version("s1", version)
        async with running(harness.new_backend()) as w:
            location = w.service.locate(meta("s1"))
            suffix = "" if location is None else f" (raw log: {location.path})"
            for call in (w.service.load, w.service.inspect):
                with pytest.raises(SessionFormatUnsupportedError) as caught:
                    await call("s1")
                assert str(caught.value) == (
                    f'session "s1" uses log format v{version}, but this harness reads only v0: '
                    "the log was written by a newer harness — upgrade the harness to open it"
                    + suffix
                )

    async def test_b07_unknown_types_are_refused_unless_ignorable(
        self, harness: BackendHarness
    ) -> None:
        kept = event(6, "future/thing", {"x": 1}, ignorable=True)
        refused = event(7, "future/other", {"y": 2})
        async with running(harness.new_backend()) as w:
            await store(w, "s1", [*complete_turn(0), kept])
            assert texts((await w.service.load("s1")).events) == texts([*complete_turn(0), kept])
            await w.service.append("s1", [refused])
        async with running(harness.new_backend()) as w:
            location = w.service.locate(meta("s1"))
            suffix = "" if location is None else f" (raw log: {location.path})"
            with pytest.raises(SessionFormatUnsupportedError) as caught:
                await w.service.load("s1")
        assert str(caught.value) == (
            'session "s1" contains event type "future/other" (seq 7) unknown to this harness and '
            "not marked ignorable; refusing to interpret the log — it was likely written by a "
            "newer harness" + suffix
        )

    # 8 ------------------------------------------------------------------------------------------

    async def test_b08_torn_tail_loads_as_prefix_plus_closers(
        self, harness: BackendHarness
    ) -> None:
        first, second = complete_turn(0), open_tool_turn(6, 2, started=True)
        async with running(harness.new_backend()) as w:
            await store(w, "s1", first, second)
        await harness.tear_tail("s1")
        async with running(harness.new_backend()) as w:
            log = await w.service.load("s1")
        whole = first + second
        kept = next(
            n for n in range(len(whole), -1, -1) if texts(log.events[:n]) == texts(whole[:n])
        )
        assert len(first) <= kept < len(whole)
        assert texts(log.events) == texts(whole[:kept] + interrupted_turn_closers(whole[:kept]))
        assert interrupted_turn_closers(log.events) == []

    async def test_b08_committed_corruption_is_refused_untouched(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "s1", complete_turn(0), complete_turn(6, 2))
        await harness.corrupt_committed("s1")
        async with running(harness.new_backend()) as w:
            before = await w.backend.read_stored_revision("s1")
            for call in (w.service.load, w.service.inspect):
                with pytest.raises(SessionPersistenceCorruptionError):
                    await call("s1")
            with pytest.raises(SessionPersistenceCorruptionError):
                await w.service.append("s1", complete_turn(12, 3))
            assert await w.backend.read_stored_revision("s1") == before

    # 9 ------------------------------------------------------------------------------------------

    async def test_b09_a_flushed_live_session_survives_a_restart(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD, "createdAt": 5})
            replay(session, complete_turn(1))
            assert await w.sessions.flush(session) is True
            expected = texts(session.events)
            header = dict(session.header)
        async with running(harness.new_backend()) as w:
            log = await w.service.load("live")
        assert texts(log.events) == expected
        assert log.header == {**header, "delegationDepth": 0}

    # 10 -----------------------------------------------------------------------------------------

    async def test_b10_an_empty_flush_writes_nothing(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(session)
            count = len(w.backend.appends)
            assert count == 1
            await w.sessions.flush(session)
            await w.sessions.flush(session)
            assert len(w.backend.appends) == count

    async def test_b10_events_inside_one_window_make_one_write(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(session)
            w.backend.appends.clear()
            turn = [*complete_turn(1), *complete_turn(7, 2), *complete_turn(13, 3)]
            turn += open_step_turn(19, 4)[:2]
            replay(session, turn[:1])
            for item in turn[1:]:  # 20 events, 10 ms apart
                await w.clock.advance(10)
                replay(session, [item])
            await anyio.wait_all_tasks_blocked()
            assert w.backend.appends == []  # 190 ms: still inside the window
            await w.clock.advance(10)  # 200 ms: the window closes
            await w.sessions.flush(session)
            assert [len(batch) for batch in w.backend.appends] == [len(turn)]

    async def test_b10_concurrent_flushes_share_one_write(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(session)
            replay(session, open_step_turn(1))
            w.backend.appends.clear()

            async def call(n: int) -> None:
                data = {"turn": 1, "step": 1, "callId": f"c{n}", "name": "probe"}
                session.append("tool/call", {**data, "arguments": "{}"})
                await w.sessions.flush(session)

            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(call, n)
            assert len(w.backend.appends) == 1
            stored = await w.service.read_from("live", 0)
            assert texts(stored) == texts(session.events)

    # 11 -----------------------------------------------------------------------------------------

    async def test_b11_a_write_fault_keeps_events_and_warns_once(
        self, harness: BackendHarness, caplog: pytest.LogCaptureFixture
    ) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(session)
            w.backend.appends.clear()
            w.backend.fault = OSError(28, "No space left on device")
            replay(session, complete_turn(1))
            with caplog.at_level(logging.WARNING, logger="plugins.session_persistence"):
                await w.clock.advance(200)
                await w.clock.advance(5000)
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert warnings == [
                f'{w.backend.name}: background write for session "live" failed (buffered events '
                "retained): [Errno 28] No space left on device"
            ]
            with pytest.raises(OSError, match="No space left"):
                await w.sessions.flush(session)
            replay(session, complete_turn(7, 2))
            with pytest.raises(OSError, match="No space left"):
                await w.sessions.flush(session)
            w.backend.fault = None
            await w.sessions.flush(session)
            assert [len(b) for b in w.backend.appends] == [12]
            assert texts(await w.service.read_from("live", 0)) == texts(session.events)

    async def test_b11_a_cancelled_flush_leaves_no_partial_record(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(session)
            replay(session, complete_turn(1))
            w.backend.gate, w.backend.started = anyio.Event(), anyio.Event()
            async with anyio.create_task_group() as tg:
                tg.start_soon(w.sessions.flush, session)
                await w.backend.started.wait()
                tg.cancel_scope.cancel()  # the write in flight is shielded: it completes
                w.backend.gate.set()
            assert [len(b) for b in w.backend.appends] == [1, 6]
            w.backend.gate = None
            await w.sessions.flush(session)
            assert texts(await w.service.read_from("live", 0)) == texts(session.events)
            assert [len(b) for b in w.backend.appends] == [1, 6]

    # 12 -----------------------------------------------------------------------------------------

    async def test_b12_live_load_and_prepare(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            replay(session, complete_turn(1))
            log = await w.service.load("live")  # flushes first
            assert texts(log.events) == texts(session.events)
            assert texts(await w.service.read_from("live", 0)) == texts(session.events)
            replay(session, open_step_turn(7, 2))
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.load("live")
            assert str(caught.value) == (
                'cannot load session "live" while its live turn is open; use the live Session or '
                "wait for the turn to close"
            )
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.prepare("live")
            assert str(caught.value) == 'cannot prepare session "live" while it is live'
            inspected = await w.service.inspect("live")  # live: the unflushed events as they are
            assert texts(inspected.events) == texts(session.events)

    async def test_b12_fork_seed_is_written_once(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            parent = w.sessions.create("parent", seed=[], meta={"cwd": CWD})
            replay(parent, complete_turn(1))
            child = w.sessions.fork(parent, id="child")
            replay(child, complete_turn(len(child.events), 2))
            await w.sessions.flush(child)
            await w.sessions.flush(parent)
            assert len(w.backend.appends) == 2
        async with running(harness.new_backend()) as w:
            log = await w.service.load("child")
        assert texts(log.events) == texts(child.events)
        assert log.header["parentSession"] == "parent"
        assert log.header["seedLength"] == len(parent.events)

    async def test_b12_resume_adds_one_end_seed_and_reload_adopts(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "s1", complete_turn(0))
            preparation = await w.service.prepare("s1")
            with pytest.raises(SessionPersistenceError) as caught:
                await w.service.append("s1", complete_turn(6, 2))
            assert str(caught.value) == (
                'cannot append session "s1" while its persisted preparation is reserved'
            )
            resumed = preparation.session
            w.sessions.enter(resumed)
            w.sessions.announce(resumed)
            replay(resumed, open_step_turn(len(resumed.events), 2))
            await w.sessions.flush(resumed)
            expected = texts(resumed.events)
        assert [loads(t)["type"] for t in expected].count("session/end-seed") == 1
        async with running(harness.new_backend()) as w:
            assert texts(await w.service.read_from("s1", 0)) == expected
            # A live session reproducing the stored (open-turn) log adopts it: no closers.
            seed = [loads(t) for t in expected]
            again = w.sessions.create("s1", seed=seed, meta={"cwd": CWD, "createdAt": 1000})
            replay(again, [event(len(again.events), "step/end", {"turn": 2, "step": 1})])
            await w.sessions.flush(again)
            assert texts(await w.service.read_from("s1", 0)) == texts(again.events)
            assert len(again.events) == len(seed) + 2  # its own end-seed, then step/end

    async def test_b12_a_released_preparation_frees_the_id(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "s1", complete_turn(0))
            preparation = await w.service.prepare("s1")
            preparation.release()
            await w.service.append("s1", complete_turn(6, 2))
            assert len(await w.service.read_from("s1", 0)) == 12

    async def test_b12_collision_texts(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            await store(w, "stored", complete_turn(0))
            await store(w, "tracked", complete_turn(0))
            await w.service.load("tracked")
        async with running(harness.new_backend()) as w:
            elsewhere = w.sessions.create("stored", meta={"cwd": "/elsewhere"})
            with pytest.raises(SessionPersistenceError) as caught:
                await w.sessions.flush(elsewhere)
            assert str(caught.value) == (
                'session "stored" is already persisted at a different cwd (persisted: '
                f"{CWD}, live: /elsewhere) (id collision)"
            )
            w.sessions.dispose(elsewhere)
            other = w.sessions.create("stored", meta={"cwd": CWD})
            with pytest.raises(SessionPersistenceError) as caught:
                await w.sessions.flush(other)
            assert str(caught.value) == (
                'session "stored" already has a persisted log on disk that does not match this '
                "live session (id collision)"
            )
            w.sessions.dispose(other)
            await w.service.load("tracked")  # tracked by this instance, no live owner
            mismatch = w.sessions.create("tracked", meta={"cwd": CWD})
            with pytest.raises(SessionPersistenceError) as caught:
                await w.sessions.flush(mismatch)
            assert str(caught.value) == (
                'session "tracked" is already persisted with 6 event(s) that do not match this '
                "live session (id collision)"
            )
            w.sessions.dispose(mismatch)
            first = w.sessions.create("dup", seed=[], meta={"cwd": CWD})
            await w.sessions.flush(first)
            second_store = SessionStore(w.ctx)
            second = second_store.create("dup", meta={"cwd": CWD})
            with pytest.raises(SessionPersistenceError) as caught:
                await second_store.flush(second)
            assert str(caught.value) == (
                'session "dup" is already bound to a different live session in this backend '
                "(id collision)"
            )
            second_store.close()
            assert await w.backend.read_stored_revision("stored") is not None
            assert len(await w.service.read_from("stored", 0)) == 6

    async def test_b12_abandoned_lazy_ids_are_reusable(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("lazy"))
        async with running(harness.new_backend()) as w:
            await w.service.create(meta("lazy", 7))
            session = w.sessions.create("lazy", seed=[], meta={"cwd": CWD, "createdAt": 9})
            replay(session, complete_turn(1))
            await w.sessions.flush(session)
        async with running(harness.new_backend()) as w:
            log = await w.service.load("lazy")
        assert log.header["createdAt"] == 7  # the live session claimed the recorded intent
        assert texts(log.events) == texts(session.events)

    async def test_b12_disposal_drains(self, harness: BackendHarness) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            replay(session, complete_turn(1))
            w.sessions.dispose(session)
            assert texts(await w.service.read_from("live", 0)) == texts(session.events)
            assert len(w.backend.appends) == 1
            again = w.sessions.create("live", seed=list(session.events), meta={"cwd": CWD})
            await w.sessions.flush(again)
            assert texts(await w.service.read_from("live", 0)) == texts(again.events)

    async def test_b12_teardown_failure_is_an_exception_group(
        self, harness: BackendHarness
    ) -> None:
        async with running(harness.new_backend()) as w:
            session = w.sessions.create("live", seed=[], meta={"cwd": CWD})
            replay(session, complete_turn(1))
            fault = OSError(5, "Input/output error")
            w.backend.fault = fault
            with pytest.raises(ExceptionGroup) as caught:
                await w.service.aclose()
            w.backend.fault = None
        assert caught.value.message == f"{w.backend.name} dispose failed"
        assert caught.value.exceptions == (fault,)

    # 13 -----------------------------------------------------------------------------------------

    async def test_b13_a_second_process_is_locked_out_then_takes_over(
        self, harness: BackendHarness
    ) -> None:
        if not harness.cross_process:
            pytest.skip(f"{harness.name} cannot be shared between processes")
        async with (
            holding(harness, "shared", open_tool_turn(0, started=True)) as child,
            running(harness.new_backend()) as w,
        ):
            before = await w.backend.read_stored_revision("shared")
            stored = await w.service.read_from("shared", 0)
            with pytest.raises(SessionLockedError) as caught:
                await w.service.append("shared", [event(len(stored), "step/end", {})])
            assert (caught.value.session_id, caught.value.pid) == ("shared", child.pid)
            assert caught.value.host == socket.gethostname()
            assert str(caught.value) == (
                f'session "shared" is locked by another writer (pid {child.pid} on host '
                f"{socket.gethostname()})"
            )
            with pytest.raises(SessionLockedError):
                await w.service.load("shared")  # its repair would write
            live = w.sessions.create("shared", seed=stored, meta={"cwd": CWD, "createdAt": 1})
            with pytest.raises(SessionLockedError):
                await w.sessions.flush(live)
            w.sessions.dispose(live)
            assert await w.backend.read_stored_revision("shared") == before
            child.send_signal(signal.SIGKILL)
            await child.wait()
            log = await w.service.load("shared")  # takes over and repairs
            assert log.events[-1]["data"]["reason"] == {"kind": "interrupted"}
            assert log.events[len(stored)]["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
            await w.service.append("shared", complete_turn(len(log.events), 2))
            total = len(log.events) + 6
        async with running(harness.new_backend()) as w:
            assert len((await w.service.load("shared")).events) == total

    async def test_b13_the_owner_of_a_live_session_is_named(self, harness: BackendHarness) -> None:
        if not harness.cross_process:
            pytest.skip(f"{harness.name} cannot be shared between processes")
        async with (
            holding(harness, "shared", open_tool_turn(0, started=True)) as child,
            running(harness.new_backend()) as w,
        ):
            before = await w.backend.read_stored_revision("shared")
            assert await w.service.owner("shared") == Owner(child.pid, socket.gethostname())
            assert await w.backend.read_stored_revision("shared") == before  # reads only
            assert await w.service.owner("nobody") is None
            child.send_signal(signal.SIGKILL)
            await child.wait()
            for _ in range(200):  # a server notices a dead client's connection soon after
                if await w.service.owner("shared") is None:
                    break
                await anyio.sleep(0.05)
            assert await w.service.owner("shared") is None

    async def test_b13_the_owner_query_names_another_instance_never_this_one(
        self, harness: BackendHarness
    ) -> None:
        async with (
            running(harness.new_backend()) as first,
            running(harness.new_backend()) as second,
        ):
            session = first.sessions.create("live", seed=[], meta={"cwd": CWD})
            replay(session, open_step_turn(1))
            await first.sessions.flush(session)
            assert await first.service.owner("live") is None
            owner = await second.service.owner("live")
            assert owner is not None
            assert owner.pid is not None
            first.sessions.dispose(session)
            await first.service.read_from("live", 0)  # waits for the retirement
            assert await second.service.owner("live") is None

    async def test_b13_stale_writers_are_refused(self, harness: BackendHarness) -> None:
        async with (
            running(harness.new_backend()) as first,
            running(harness.new_backend()) as second,
        ):
            await store(first, "s1", complete_turn(0))
            await second.service.load("s1")
            await first.service.append("s1", complete_turn(6, 2))
            with pytest.raises(StaleWriterError) as caught:
                await second.service.append("s1", complete_turn(6, 3))
            assert str(caught.value) == (
                'session "s1" changed on disk since this process last read it; reload it before '
                "writing"
            )
            assert len(await second.service.read_from("s1", 0)) == 12

    # 14 -----------------------------------------------------------------------------------------

    @pytest.mark.parametrize("name", FIXTURE_NAMES)
    async def test_b14_original_fixture_logs_copy_through(
        self, harness: BackendHarness, name: str
    ) -> None:
        header, events = read_fixture(FIXTURES / name)
        async with running(harness.new_backend()) as w:
            await w.service.create({k: v for k, v in header.items() if k != "version"})
            await w.service.append(header["id"], events)
        async with running(harness.new_backend()) as w:
            assert texts(await w.service.read_from(header["id"], 0)) == texts(events)
            inspected = await w.service.inspect(header["id"])
            assert inspected.header == {
                **header,
                "delegationDepth": header.get("delegationDepth", 0),
            }
            assert texts(inspected.events[: len(events)]) == texts(events)
