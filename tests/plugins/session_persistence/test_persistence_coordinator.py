"""Coordinator rules beyond the contract suite (docs/persistence.md), on JSONL raw files, and
on the in-memory test backend where a stored log must be shaped by hand."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

import anyio
import pytest

import plugins.session as session_plugin
from framework import Context
from plugins.session import SessionStore
from plugins.session.jsonutil import dumps
from plugins.session_persistence import (
    Config,
    PersistenceBackend,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    mount_persistence,
)
from plugins.session_persistence.testing import (
    CWD,
    FakeClock,
    FaultInjector,
    complete_turn,
    event,
    meta,
    open_step_turn,
    replay,
    running,
    texts,
)
from plugins.session_persistence.testing.memory import MemoryBackend, MemoryStorage
from plugins.session_persistence_jsonl import JsonlBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonlBackend:
    return JsonlBackend(tmp_path / "sessions", compression="none")


async def test_applying_the_backend_binds_sessions_that_are_already_live(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        session = ctx.sessions.create("early", seed=[], meta={"cwd": CWD})
        replay(session, complete_turn(1))
        backend = FaultInjector(JsonlBackend(tmp_path, compression="none"))

        async def persistence(ctx: Context, config: object) -> object:
            return await mount_persistence(ctx, backend, Config(), clock=FakeClock())

        await ctx.plugin(persistence)
        await ctx.sessions.flush(session)
        assert texts(await ctx.sessionPersistence.read_from("early", 0)) == texts(session.events)
        assert len(backend.appends) == 1


async def test_live_batches_skip_seqs_already_durable(jsonl: JsonlBackend) -> None:
    async with running(jsonl) as w:
        session = w.sessions.create("s1", seed=[], meta={"cwd": CWD})
        await w.sessions.flush(session)
        replay(session, open_step_turn(1))
        await w.service.append("s1", session.events[1:3])  # written by someone else first
        await w.sessions.flush(session)
        assert texts(await w.service.read_from("s1", 0)) == texts(session.events)
        assert [[e["seq"] for e in batch] for batch in w.backend.appends] == [[0], [1, 2], [3]]


async def test_inspect_caches_the_preparation_for_prepare(jsonl: JsonlBackend) -> None:
    async with running(jsonl) as w:
        await w.service.create(meta("s1"))
        await w.service.append("s1", complete_turn(0))
        await w.service.inspect("s1")
        loads = w.backend.loads
        preparation = await w.service.prepare("s1")
        assert w.backend.loads == loads  # the revision held: no second read
        assert texts(preparation.session.events[:6]) == texts(complete_turn(0))
        preparation.release()
        await w.service.inspect("s1")
        await w.service.append("s1", complete_turn(6, 2))  # a new revision drops the cache
        loads = w.backend.loads
        (await w.service.prepare("s1")).release()
        assert w.backend.loads == loads + 1


async def test_inspect_batch_answers_one_id_at_a_time_without_load_many(
    jsonl: JsonlBackend,
) -> None:
    async with running(jsonl) as w:  # the fault injector reads one log per call
        for name in ("s1", "s2"):
            await w.service.create(meta(name))
            await w.service.append(name, complete_turn(0))
        found = await w.service.inspect_batch(["s1", "s2", "missing"])
        missing = await w.service.inspect_batch(["missing"])
        assert len(found) == 1
        assert texts(found[0].events) == texts(complete_turn(0))  # type: ignore[union-attr]
        assert isinstance(missing[0], SessionNotFoundError)


async def test_prepare_twice_and_publishing_another_session_under_a_reserved_id(
    jsonl: JsonlBackend,
) -> None:
    async with running(jsonl) as w:
        await w.service.create(meta("s1"))
        await w.service.append("s1", complete_turn(0))
        await w.service.prepare("s1")
        with pytest.raises(SessionPersistenceError) as caught:
            await w.service.prepare("s1")
        assert str(caught.value) == (
            'cannot prepare session "s1" while its persisted preparation is reserved'
        )
        stranger = w.sessions.create("s1", seed=complete_turn(0), meta={"cwd": CWD})
        with pytest.raises(SessionPersistenceError) as caught:
            await w.sessions.flush(stranger)
        assert str(caught.value) == (
            'session "s1" is already bound to a different live session in this backend '
            "(id collision)"
        )


async def test_reads_and_prepare_wait_for_a_retirement_in_progress(jsonl: JsonlBackend) -> None:
    async with running(jsonl) as w:
        session = w.sessions.create("s1", seed=[], meta={"cwd": CWD})
        replay(session, complete_turn(1))
        w.backend.gate, w.backend.started = anyio.Event(), anyio.Event()
        order: list[str] = []

        async def read() -> None:
            await w.service.read_from("s1", 0)
            order.append("read")

        async with anyio.create_task_group() as tg:
            w.sessions.dispose(session)  # retirement: flush, then drop state and lock
            await w.backend.started.wait()
            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            order.append("write released")
            w.backend.gate.set()
        assert order == ["write released", "read"]
        preparation = await w.service.prepare("s1")
        assert texts(preparation.session.events[:7]) == texts(session.events)


async def test_a_failed_retirement_warns_and_teardown_drains_it(
    jsonl: JsonlBackend, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(jsonl) as w:
        session = w.sessions.create("s1", seed=[], meta={"cwd": CWD})
        replay(session, complete_turn(1))
        w.backend.fault = OSError(5, "Input/output error")
        with caplog.at_level(logging.WARNING, logger="plugins.session_persistence"):
            w.sessions.dispose(session)
            with pytest.raises(SessionPersistenceError, match="not found"):
                await w.service.read_from("s1", 0)  # waits for the retirement to end
        assert [r.getMessage() for r in caplog.records] == [
            'session-persistence-jsonl: session "s1" retirement failed: '
            "[Errno 5] Input/output error"
        ]
        w.backend.fault = None
        await w.service.aclose()  # the kept controller is drained at teardown
        fresh = JsonlBackend(jsonl.root, compression="none")
        stored = await fresh.load_stored("s1")
        assert stored is not None
        assert texts(stored.events) == texts(session.events)


async def test_an_unmaterialized_idle_owner_is_dropped_for_a_new_one(jsonl: JsonlBackend) -> None:
    async with running(jsonl) as w:
        first = w.sessions.create("dup", meta={"cwd": CWD})  # no events yet: nothing to write
        await w.sessions.flush(first)
        other_store = SessionStore(w.ctx)
        second = other_store.create("dup", seed=[], meta={"cwd": CWD})
        replay(second, complete_turn(1))
        await other_store.flush(second)
        replay(first, complete_turn(0))
        await w.sessions.flush(first)  # dropped: nothing of it is written any more
        assert texts(await w.service.read_from("dup", 0)) == texts(second.events)
        other_store.close()


async def test_a_transient_write_meets_a_live_owner_in_another_instance(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    async with (
        running(JsonlBackend(root, compression="none")) as owner,
        running(JsonlBackend(root, compression="none")) as other,
    ):
        session = owner.sessions.create("s1", seed=[], meta={"cwd": CWD})
        await owner.sessions.flush(session)
        with pytest.raises(SessionLockedError) as caught:
            await other.service.append("s1", [event(1, "session/end-seed", {})])
        assert (caught.value.pid, caught.value.host) == (os.getpid(), socket.gethostname())
        assert len(await other.service.read_from("s1", 0)) == 1


async def test_group_commit_with_a_write_in_flight_adds_at_most_one_write(
    jsonl: JsonlBackend,
) -> None:
    async with running(jsonl) as w:
        session = w.sessions.create("s1", seed=[], meta={"cwd": CWD})
        await w.sessions.flush(session)
        replay(session, open_step_turn(1))
        w.backend.gate, w.backend.started = anyio.Event(), anyio.Event()
        w.backend.appends.clear()
        await w.clock.advance(200)  # the window closes: a background write starts, held open
        await w.backend.started.wait()

        async def call(n: int) -> None:
            data = {"turn": 1, "step": 1, "callId": f"c{n}", "name": "probe", "arguments": "{}"}
            session.append("tool/call", data)
            await w.sessions.flush(session)

        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(call, n)
            await anyio.wait_all_tasks_blocked()
            w.backend.gate.set()
        assert [len(batch) for batch in w.backend.appends] == [3, 6]
        assert texts(await w.service.read_from("s1", 0)) == texts(session.events)


async def test_operations_on_one_id_run_in_arrival_order(jsonl: JsonlBackend) -> None:
    async with running(jsonl) as w:
        await w.service.create(meta("s1"))
        await w.service.append("s1", complete_turn(0))
        w.backend.gate, w.backend.started = anyio.Event(), anyio.Event()
        seen: list[int] = []

        async def read() -> None:
            seen.append(len(await w.service.read_from("s1", 0)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(w.service.append, "s1", complete_turn(6, 2))
            await w.backend.started.wait()
            tg.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            assert seen == []  # queued behind the append in flight
            w.backend.gate.set()
        assert seen == [12]


# -- stored logs shaped by hand (in-memory backend) ----------------------------------------------


async def _stored(storage: MemoryStorage, events: list[dict[str, object]]) -> None:
    async with running(MemoryBackend(storage)) as w:
        await w.service.create(meta("s1"))
        await w.service.append("s1", events)


async def test_identity_mismatch_and_older_versions_are_refused() -> None:
    storage = MemoryStorage()
    await _stored(storage, complete_turn(0))
    storage.set_version("s1", -1)
    async with running(MemoryBackend(storage)) as w:
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            await w.service.load("s1")
        assert str(caught.value) == (
            'session "s1" uses log format v-1, older than the supported v0, and this build ships '
            "no upgrade path for it (raw log: memory://s1)"
        )
    storage.set_version("s1", 0)
    storage.logs["s1"].meta = dumps({"version": 0, "id": "s2", "createdAt": 1, "cwd": CWD})
    async with running(MemoryBackend(storage)) as w:
        with pytest.raises(SessionPersistenceCorruptionError) as mismatch:
            await w.service.inspect("s1")
    assert str(mismatch.value) == (
        'stored session identity mismatch: requested "s1", header contains "s2"'
    )


async def test_other_validation_failures_are_corruption() -> None:
    storage = MemoryStorage()
    broken = complete_turn(0)
    broken[3]["surfaceOp"] = "prepend"
    await _stored(storage, broken)
    async with running(MemoryBackend(storage)) as w:
        with pytest.raises(SessionPersistenceCorruptionError) as caught:
            await w.service.load("s1")
    assert str(caught.value).startswith('stored session "s1" failed validation: ')
    assert "surfaceOp" in str(caught.value)


async def test_retired_shapes_are_refused_by_append() -> None:
    async with running(MemoryBackend(MemoryStorage())) as w:
        await w.service.create(meta("s1"))
        header = {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"}
        with pytest.raises(SessionPersistenceError) as caught:
            await w.service.append("s1", [event(0, "request/header", header)])
        assert str(caught.value) == (
            'event "request/header" (seq 0) reason "fallback" is retired and refused'
        )
        with pytest.raises(SessionPersistenceError) as caught:
            await w.service.append("s1", [event(0, "request/header-delta", {})])
        assert str(caught.value) == (
            'event type "request/header-delta" (seq 0) is refused: it was retired; '
            "request/header replaces it"
        )
        assert w.backend.appends == []


async def test_an_event_without_seq_is_a_seq_mismatch() -> None:
    async with running(MemoryBackend(MemoryStorage())) as w:
        await w.service.create(meta("s1"))
        with pytest.raises(SessionPersistenceError) as caught:
            await w.service.append("s1", [{"type": "turn/start", "time": 1, "data": {"turn": 1}}])
        assert str(caught.value) == (
            'append seq mismatch for "s1": expected 0 at index 0, got undefined'
        )


# -- configuration and mounting --------------------------------------------------------------------


def test_config_defaults_aliases_and_bounds() -> None:
    config = Config()
    assert (config.write_batch_max_delay_ms, config.prepared_session_cache_size) == (200, 5)
    assert Config.model_validate({"writeBatchMaxDelayMs": 1}).write_batch_max_delay_ms == 1
    by_name = Config.model_validate({"write_batch_max_delay_ms": 2**31 - 1})
    assert by_name.write_batch_max_delay_ms == 2**31 - 1
    for bad in (0, 2**31, 1.5, "soon"):
        with pytest.raises(ValueError, match="writeBatchMaxDelayMs"):
            Config.model_validate({"writeBatchMaxDelayMs": bad})
    with pytest.raises(ValueError, match="extra"):
        Config.model_validate({"unknown": 1})


async def test_a_failed_mount_closes_its_backend() -> None:
    first, second = MemoryBackend(MemoryStorage()), MemoryBackend(MemoryStorage())
    async with Context() as ctx:

        def plugin(backend: PersistenceBackend) -> object:
            async def persistence(ctx: Context, config: object) -> object:
                return await mount_persistence(ctx, backend, Config())

            return persistence

        await ctx.plugin(plugin(first))
        fiber = ctx.plugin(plugin(second))
        with pytest.raises(Exception, match="sessionPersistence"):
            await fiber
        assert second.closed
        assert not first.closed
    assert first.closed


async def test_the_fault_injector_keeps_a_jsonl_live_write_on_its_encoder_path(
    jsonl: JsonlBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faults, gate and records apply to the encoder path the coordinator takes for JSONL."""
    import plugins.session_persistence_jsonl.encoder as encoder_module
    from plugins.session_persistence.testing.fakes import EncodingFaultInjector

    admitted: list[int] = []
    admit = encoder_module.Ahead.admit

    def counting(self: encoder_module.Ahead, event: dict[str, object]) -> None:
        admitted.append(int(event["seq"]))  # type: ignore[call-overload]
        admit(self, event)

    monkeypatch.setattr(encoder_module.Ahead, "admit", counting)
    assert not isinstance(FaultInjector(MemoryBackend(MemoryStorage())), EncodingFaultInjector)
    async with running(jsonl) as w:
        assert isinstance(w.backend, EncodingFaultInjector)
        session = w.sessions.create("s1", seed=[], meta={"cwd": CWD})
        replay(session, complete_turn(1))
        w.backend.fault = OSError(5, "Input/output error")
        with pytest.raises(OSError, match="Input/output error"):
            await w.sessions.flush(session)
        assert w.backend.appends == []
        w.backend.fault = None
        w.backend.gate = anyio.Event()
        w.backend.started = anyio.Event()
        async with anyio.create_task_group() as tg:
            scope = anyio.CancelScope()

            async def flush() -> None:
                with scope:
                    await w.sessions.flush(session)

            tg.start_soon(flush)
            await w.backend.started.wait()
            scope.cancel()  # the held write is part of the write: it still completes
            await anyio.wait_all_tasks_blocked()
            w.backend.gate.set()
        await w.sessions.flush(session)
        assert [len(batch) for batch in w.backend.appends] == [len(session.events)]
        seqs = [event["seq"] for event in session.events]
        assert admitted
        assert admitted == seqs[-len(admitted) :]
    stored = await JsonlBackend(jsonl.root, compression="none").load_stored("s1")
    assert stored is not None
    assert texts(stored.events) == texts(session.events)
