"""Legacy logs stored by every backend load upgraded through `sessionPersistence`; storage keeps
the stored form (docs/legacy-logs.md).

Each log is written with the backend's own `append_batch` (the backends store what they are
given), then read back through the service: `inspect`, `load` and `read_from` return the
upgraded events, a `prepare`d Session derives the model-visible messages from them, and the
stored events are unchanged afterwards (a repair only appends closers). PostgreSQL runs on asyncio
only: its driver's async API does not run on trio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from postgres_support import fresh_schema, run_dsn

import plugins.session as session_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
import plugins.session_persistence_postgres as postgres_plugin
import plugins.session_persistence_sqlite as sqlite_plugin
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence import (
    PersistenceBackend,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_postgres import PostgresBackend
from plugins.session_persistence_sqlite import SqliteBackend

pytestmark = pytest.mark.anyio

JsonObject = dict[str, Any]
CWD = "/home/u/project"
STORES = ["jsonl-none", "jsonl-zstd", "sqlite", "postgres"]


class Store:
    """One backend's storage in a test: write stored events raw, mount the service over it."""

    def __init__(self, kind: str, tmp_path: Path, stack: ExitStack) -> None:
        self.kind = kind
        self.root = tmp_path / "sessions"
        directory = tmp_path / "db"
        directory.mkdir(mode=0o700)
        self.path = directory / "sessions.sqlite3"
        self.schema = stack.enter_context(fresh_schema()) if kind == "postgres" else ""

    def backend(self) -> PersistenceBackend:
        if self.kind == "sqlite":
            return SqliteBackend(self.path)
        if self.kind == "postgres":
            return PostgresBackend(run_dsn(), schema=self.schema)
        return JsonlBackend(self.root, compression=self.kind.removeprefix("jsonl-"))  # type: ignore[arg-type]

    async def write(self, meta: JsonObject, events: list[JsonObject]) -> None:
        backend = self.backend()
        try:
            await backend.append_batch(meta, events, is_materialized=False)
        finally:
            await backend.aclose()

    async def stored(self, session_id: str) -> list[str]:
        """The stored events as JSON text, read by a bare backend (no upgrade)."""
        backend = self.backend()
        try:
            stored = await backend.load_stored(session_id)
        finally:
            await backend.aclose()
        assert stored is not None
        return [dumps(event) for event in stored.events]

    @asynccontextmanager
    async def service(self) -> AsyncIterator[Any]:
        if self.kind == "sqlite":
            plugin, config = sqlite_plugin, {"path": str(self.path)}
        elif self.kind == "postgres":
            plugin, config = postgres_plugin, {"dsn": run_dsn(), "schema": self.schema}
        else:
            mode = self.kind.removeprefix("jsonl-")
            plugin, config = jsonl_plugin, {"root": str(self.root), "compression": mode}
        async with Context() as ctx:
            await ctx.plugin(session_plugin)
            await ctx.plugin(plugin, config)
            yield ctx.sessionPersistence


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> Iterator[Store]:
    if request.param == "postgres" and anyio_backend == "trio":
        pytest.skip("the PostgreSQL driver's async API runs on asyncio only")
    with ExitStack() as stack:
        yield Store(request.param, tmp_path, stack)


def ev(seq: int, kind: str, data: Any, **envelope: Any) -> JsonObject:
    return {"type": kind, "seq": seq, "time": 1000 + seq, "data": data, **envelope}


def text(value: str) -> list[JsonObject]:
    return [{"type": "text", "text": value}]


USER = {"kind": "user"}
APPEND = {"surfaceOp": "append"}
PROVENANCE = {"provider": "replay", "model": "m1"}
CALL = {"type": "tool-call", "id": "c1", "name": "echo", "arguments": "{}"}

#: A closed log of an older release: nine `user/message` events without identity (in the ways
#: the original wrote them), both kinds of `steering/message`, `turn/start` triggers, old
#: `turn/end` reasons, and an `assistant/message` and two `tool/result`s before the wrapper.
LEGACY_LOG: list[JsonObject] = [
    ev(0, "user/message", {"content": text("seeded"), "source": USER}, **APPEND),
    ev(1, "session/end-seed", {}),
    ev(2, "turn/start", {"turn": 1, "trigger": {"kind": "user"}}),
    ev(3, "user/message", {"source": USER, "content": text("a") + text("b")}, **APPEND),
    ev(4, "step/start", {"turn": 1, "step": 1}),
    ev(
        5,
        "assistant/message",
        {"turn": 1, "step": 1, "content": [*text("calling"), CALL], "provenance": PROVENANCE},
        surfaceOp="append",
        sourceEventSeqs=[],
    ),
    ev(6, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": "{}"}),
    ev(
        7,
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c1", "content": text("long result"), "isError": False},
        **APPEND,
    ),
    ev(8, "step/end", {"turn": 1, "step": 1}),
    ev(9, "steering/message", {"turn": 1, "content": text("steer"), "source": USER}, **APPEND),
    ev(10, "turn/end", {"turn": 1, "reason": {"kind": "disposed"}}),
    ev(11, "turn/start", {"turn": 2, "trigger": {"kind": "schedule", "at": 5}}),
    ev(
        12,
        "user/message",
        {"content": [{"type": "image", "mediaType": "image/png", "data": "AA=="}], "source": USER},
        **APPEND,
    ),
    ev(
        13,
        "user/message",
        {"content": text("from a plugin"), "source": {"kind": "plugin", "plugin": "inbox"}},
        **APPEND,
    ),
    ev(
        14,
        "steering/message",
        {"turn": 2, "message": {"content": text("wrapped"), "source": USER}},
        **APPEND,
    ),
    ev(
        15,
        "user/message",
        {"content": text("cites"), "source": USER},
        sourceEventSeqs=[12],
        surfaceOp="append",
    ),
    ev(
        16,
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c1", "content": text("short"), "isError": False},
        sourceEventSeqs=[7],
        surfaceOp={"op": "replace", "start": 7, "end": 7},
    ),
    ev(
        17,
        "user/message",
        {"content": text("summary"), "source": {"kind": "plugin", "plugin": "compact"}},
        sourceEventSeqs=[0, 3],
        surfaceOp={"op": "replace", "start": 0, "end": 3},
    ),
    ev(18, "turn/end", {"turn": 2, "reason": {"kind": "error", "step": 0, "message": "boom"}}),
    ev(19, "turn/start", {"turn": 3, "trigger": {"kind": "user"}}),
    ev(20, "user/message", {"content": [], "source": USER}, **APPEND),
    ev(21, "turn/end", {"turn": 3, "reason": {"kind": "aborted"}}),
    ev(22, "turn/start", {"turn": 4, "trigger": {"kind": "user"}}),
    ev(
        23,
        "user/message",
        {"content": text("x"), "source": {"kind": "plugin", "plugin": "p", "note": 1}},
        **APPEND,
    ),
    ev(
        24,
        "turn/end",
        {
            "turn": 4,
            "reason": {
                "kind": "error",
                "step": 2,
                "failure": {"message": "rate", "code": "RATE_LIMIT", "status": 429},
            },
        },
    ),
    ev(25, "user/message", {"content": text("between turns"), "source": USER}, **APPEND),
]


def lid(seq: int) -> str:
    return f"legacy-message:old:{seq}"


def check_upgraded(events: list[JsonObject]) -> None:
    """The upgraded form of `LEGACY_LOG` (its first `len(LEGACY_LOG)` events)."""
    by_seq = {event["seq"]: event for event in events}
    users = [0, 3, 12, 13, 15, 17, 20, 23, 25]
    for seq in users:
        data = by_seq[seq]["data"]
        assert list(data) == [*LEGACY_LOG[seq]["data"], "id", "role"]
        assert (data["id"], data["role"]) == (lid(seq), "user")
    assert dumps(by_seq[9]) == (
        '{"type":"user/message","seq":9,"time":1009,"data":{"content":[{"type":"text",'
        '"text":"steer"}],"source":{"kind":"user"},"id":"legacy-message:old:9","role":"user"},'
        '"surfaceOp":"append"}'
    )
    assert by_seq[14]["type"] == "user/message"
    assert by_seq[14]["data"]["id"] == lid(14)
    for seq, turn in ((2, 1), (11, 2), (19, 3), (22, 4)):
        assert dumps(by_seq[seq]["data"]) == f'{{"turn":{turn}}}'
    assert by_seq[10]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "disposed"}}
    assert dumps(by_seq[18]["data"]["reason"]) == (
        '{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}'
    )
    assert by_seq[21]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "legacy"}}
    assert by_seq[24]["data"]["reason"]["error"] == {
        "message": "rate",
        "code": "RATE_LIMIT",
        "status": 429,
    }
    assert dumps(by_seq[5]["data"]) == (
        '{"turn":1,"step":1,"message":{"id":"legacy-message:old:5","role":"assistant",'
        '"content":[{"type":"text","text":"calling"},{"type":"tool-call","id":"c1",'
        '"name":"echo","arguments":"{}"}],"source":{"provider":"replay","model":"m1",'
        '"kind":"model"}}}'
    )
    assert by_seq[7]["data"]["message"]["id"] == lid(7)
    assert by_seq[16]["data"]["message"]["id"] == lid(7)  # a replacement keeps the id


def meta(session_id: str = "old") -> JsonObject:
    return {"version": 0, "id": session_id, "createdAt": 5, "cwd": CWD}


async def test_inspect_load_and_read_from_return_the_upgraded_log(store: Store) -> None:
    await store.write(meta(), LEGACY_LOG)
    before = await store.stored("old")
    async with store.service() as persistence:
        inspected = await persistence.inspect("old")
        loaded = await persistence.load("old")
        suffix = await persistence.read_from("old", 9)
        preparation = await persistence.prepare("old")
        messages = preparation.session.messages()
        preparation.release()
    for events in (inspected.events, loaded.events):
        assert len(events) == len(LEGACY_LOG)  # closed: no closers
        check_upgraded(events)
    assert [dumps(e) for e in suffix] == [dumps(e) for e in loaded.events[9:]]
    assert [m["id"] for m in messages] == [
        lid(17),
        lid(5),
        lid(7),
        lid(9),
        lid(12),
        lid(13),
        lid(14),
        lid(15),
        lid(20),
        lid(23),
        lid(25),
    ]
    assert messages[2]["content"][0]["content"] == text("short")
    assert await store.stored("old") == before  # nothing rewritten


async def test_a_repair_appends_closers_after_the_stored_legacy_events(store: Store) -> None:
    open_turn = [
        *LEGACY_LOG[:2],
        ev(2, "turn/start", {"turn": 1, "trigger": {"kind": "user"}}),
        ev(3, "user/message", {"content": text("hi"), "source": USER}, **APPEND),
        ev(4, "step/start", {"turn": 1, "step": 1}),
    ]
    await store.write(meta(), open_turn)
    before = await store.stored("old")
    async with store.service() as persistence:
        inspected = await persistence.inspect("old")
        assert await store.stored("old") == before  # inspect never writes
        loaded = await persistence.load("old")
    assert [e["type"] for e in loaded.events[5:]] == ["step/end", "turn/end"]
    assert [dumps(e) for e in inspected.events] == [dumps(e) for e in loaded.events]
    assert loaded.events[2]["data"] == {"turn": 1}
    assert loaded.events[3]["data"]["id"] == lid(3)
    after = await store.stored("old")
    assert after[:5] == before
    assert [dumps(e) for e in loaded.events[5:]] == after[5:]


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (ev(2, "mode/set", {"mode": "plan"}), "unsupported legacy mode/set event at seq 2"),
        (
            ev(2, "request/header-delta", {}),
            "unsupported legacy request/header-delta event at seq 2",
        ),
        (
            ev(2, "request/header", {"header": {"config": {}}, "reason": "fallback"}),
            'unsupported legacy request/header reason "fallback" at seq 2',
        ),
        (
            ev(2, "turn/start", {"turn": 1, "trigger": {"kind": ""}}),
            "malformed pre-react-loop turn/start at seq 2",
        ),
        (
            ev(2, "turn/end", {"turn": 1, "reason": {"kind": "disposed", "by": "x"}}),
            "malformed pre-react-loop turn/end at seq 2",
        ),
        (
            ev(2, "steering/message", {"turn": 1, "content": text("x")}, **APPEND),
            "malformed pre-react-loop steering/message at seq 2",
        ),
    ],
)
async def test_refused_and_malformed_legacy_logs_fail_every_read(
    store: Store, event: JsonObject, why: str
) -> None:
    await store.write(meta(), [*LEGACY_LOG[:2], event])
    before = await store.stored("old")
    expected = f'stored session "old" failed validation: Error: session "old" contains {why}'
    async with store.service() as persistence:
        for read in (persistence.inspect, persistence.load, persistence.prepare):
            with pytest.raises(SessionPersistenceCorruptionError) as caught:
                await read("old")
            assert str(caught.value) == expected
        with pytest.raises(SessionPersistenceCorruptionError) as caught:
            await persistence.read_from("old", 0)
        assert str(caught.value) == expected
    assert await store.stored("old") == before


UNKNOWN = ev(2, "future/thing", {})
#: Fails validation (only surface events carry a `surfaceOp`).
INVALID = ev(2, "step/start", {"turn": 1, "step": 1}, surfaceOp="append")


@pytest.mark.parametrize(
    ("events", "error", "why"),
    [
        # The legacy refusals are decided on the whole log, before the format refusals and
        # validation, though a cold prepare checks all of them in one walk.
        (
            [UNKNOWN, ev(3, "mode/set", {"mode": "plan"})],
            SessionPersistenceCorruptionError,
            'failed validation: Error: session "old" contains unsupported legacy mode/set '
            "event at seq 3",
        ),
        (
            [INVALID, ev(3, "turn/end", {"turn": 1, "reason": {"kind": "completed", "a": 1}})],
            SessionPersistenceCorruptionError,
            'failed validation: Error: session "old" contains malformed pre-react-loop '
            "turn/end at seq 3",
        ),
        (
            [INVALID, ev(3, "turn/start", {"turn": 1}), {**UNKNOWN, "seq": 4}],
            SessionFormatUnsupportedError,
            'contains event type "future/thing" (seq 4) unknown to this harness',
        ),
    ],
)
async def test_a_cold_read_reports_the_first_rule_a_log_breaks(
    store: Store, events: list[JsonObject], error: type[Exception], why: str
) -> None:
    await store.write(meta(), [*LEGACY_LOG[:2], *events])
    async with store.service() as persistence:
        for read in (persistence.inspect, persistence.load, persistence.prepare):
            with pytest.raises(error) as caught:
                await read("old")
            assert why in str(caught.value)
