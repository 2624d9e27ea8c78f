"""Test support for persistence backends, importable without pytest.

- `FakeClock` (drives the batching window) and `FaultInjector` (wraps a backend: counts writes,
  injects failures, holds writes in flight);
- event builders (`event`, `complete_turn`, `open_step_turn`, `open_tool_turn`, `meta`, ...);
- `running(backend)`: a root Context with `sessions` and `sessionPersistence` over a backend;
- the original harness's fixture logs (`FIXTURES`, `read_fixture`), shipped in this package;
- `testing.memory.MemoryBackend`, the in-memory reference backend.

The pytest contract suite is `testing.contract` and the child process it runs is
`testing.child`.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import plugins.session as session_plugin
from framework import Context, Fiber
from plugins.session import Session, SessionStore
from plugins.session.events import live_event
from plugins.session.jsonutil import dumps, loads

from ..backend import (
    JsonObject,
    Location,
    Owner,
    PersistenceBackend,
    SetAside,
    Snapshot,
    StoredLog,
)
from ..config import Config
from ..packing import decode_record
from ..service import SessionPersistenceService, mount_persistence

__all__ = [
    "CWD",
    "FIXTURES",
    "FIXTURE_NAMES",
    "T0",
    "FakeClock",
    "FaultInjector",
    "World",
    "complete_turn",
    "event",
    "meta",
    "open_step_turn",
    "open_tool_turn",
    "read_fixture",
    "replay",
    "running",
    "store",
    "texts",
]

T0 = 1_767_225_600_000
CWD = "/home/user/project"
#: The original harness's logs (`$DSH_FIXTURE_LOGS`, else the copies shipped beside this file).
FIXTURES = Path(
    os.environ.get("DSH_FIXTURE_LOGS", Path(__file__).resolve().parent / "original_logs")
)
#: The original harness's logs every backend must read (a missing one fails, never skips).
FIXTURE_NAMES = (
    "advanced-toolchain.jsonl",
    "fs-policy-reject.jsonl",
    "goal-multi-turn-actions.jsonl",
    "tool-outcome-unknown-resumed.jsonl",
)


# -- clock and fault injection --------------------------------------------------------------------


class FakeClock:
    """A manual clock for the batching window: `mount_persistence(..., clock=FakeClock())`.

    Time stands still until `advance` moves it (and wakes the timers that became due).
    """

    def __init__(self) -> None:
        self._now = 0.0
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def now(self) -> float:
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        wake = anyio.Event()
        entry = (deadline, wake)
        self._sleepers.append(entry)
        try:
            if deadline > self._now:
                await wake.wait()
            else:
                await anyio.lowlevel.checkpoint()
        finally:
            self._sleepers.remove(entry)

    async def advance(self, ms: float) -> None:
        """Let armed timers start, move time forward, wake the sleepers due, let them run."""
        await anyio.wait_all_tasks_blocked()
        self._now += ms / 1000
        for deadline, wake in list(self._sleepers):
            if deadline <= self._now + 1e-9:
                wake.set()
        await anyio.wait_all_tasks_blocked()


class FaultInjector:
    """Wraps a backend: records each `append_batch` (and counts `load_stored` calls), fails
    writes on demand, holds them open.

    `fault`: raised by `append_batch` and `commit_repair` (before the inner backend is called)
    while set. `gate`: when set, each write waits for it after announcing itself on `started`.
    """

    def __init__(self, inner: PersistenceBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.appends: list[list[JsonObject]] = []
        self.loads = 0
        self.fault: Exception | None = None
        self.gate: anyio.Event | None = None
        self.started: anyio.Event | None = None

    def locate(self, meta: JsonObject) -> Location | None:
        return self.inner.locate(meta)

    async def read_raw(self, session_id: str) -> bytes:
        return await self.inner.read_raw(session_id)

    async def load_stored(self, session_id: str) -> StoredLog | None:
        self.loads += 1
        return await self.inner.load_stored(session_id)

    async def read_stored_revision(self, session_id: str) -> str | None:
        return await self.inner.read_stored_revision(session_id)

    async def _enter_write(self) -> None:
        if self.started is not None:
            self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fault is not None:
            raise self.fault

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        await self._enter_write()
        await self.inner.append_batch(meta, events, is_materialized=is_materialized)
        self.appends.append(list(events))

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        await self._enter_write()
        return await self.inner.commit_repair(meta, marker, closers)

    async def list(self) -> builtins.list[JsonObject]:
        return await self.inner.list()

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        return await self.inner.list_snapshots()

    async def acquire_writer(self, session_id: str) -> None:
        await self.inner.acquire_writer(session_id)

    async def release_writer(self, session_id: str) -> None:
        await self.inner.release_writer(session_id)

    async def owner(self, session_id: str) -> Owner | None:
        return await self.inner.owner(session_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- events ---------------------------------------------------------------------------------------


def event(
    seq: int,
    kind: str,
    data: Any,
    *,
    surface_op: Any = None,
    source: list[int] | None = None,
    ignorable: bool = False,
) -> JsonObject:
    """An event in live key order at time `T0 + seq`."""
    return live_event(
        kind,
        seq,
        T0 + seq,
        data,
        ignorable=ignorable,
        source_event_seqs=source,
        surface_op=surface_op,
    )


def _user(seq: int, text: str) -> JsonObject:
    message = {
        "id": f"user-{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return event(seq, "user/message", message, surface_op="append")


def _assistant(seq: int, turn: int, content: list[JsonObject]) -> JsonObject:
    message = {
        "id": f"assistant-{seq}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "replay", "model": "replay-1"},
    }
    data = {"turn": turn, "step": 1, "message": message}
    return event(seq, "assistant/message", data, surface_op="append")


def open_step_turn(start: int, turn: int = 1) -> list[JsonObject]:
    """`turn/start`, `user/message`, `step/start`: a turn cut off in its open step."""
    return [
        event(start, "turn/start", {"turn": turn}),
        _user(start + 1, f"question {turn}"),
        event(start + 2, "step/start", {"turn": turn, "step": 1}),
    ]


def complete_turn(start: int, turn: int = 1) -> list[JsonObject]:
    """A balanced turn of six events from seq `start`."""
    answer = _assistant(start + 3, turn, [{"type": "text", "text": f"answer {turn}"}])
    return [
        *open_step_turn(start, turn),
        answer,
        event(start + 4, "step/end", {"turn": turn, "step": 1}),
        event(start + 5, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def open_tool_turn(start: int, turn: int = 1, *, started: bool) -> list[JsonObject]:
    """A turn cut off after the model asked for tool call `call-<turn>` (logged as started, a
    `tool/call`, when `started`)."""
    call = {"type": "tool-call", "id": f"call-{turn}", "name": "probe", "arguments": "{}"}
    events = [*open_step_turn(start, turn), _assistant(start + 3, turn, [call])]
    if started:
        data = {"turn": turn, "step": 1, "callId": f"call-{turn}", "name": "probe"}
        events.append(event(start + 4, "tool/call", {**data, "arguments": "{}"}))
    return events


def replay(session: Session, events: Sequence[JsonObject]) -> None:
    """Append builder events to a live session (its own seqs and times)."""
    for item in events:
        session.append(
            item["type"],
            item["data"],
            surface_op=item.get("surfaceOp"),
            source_event_seqs=item.get("sourceEventSeqs"),
        )


def texts(events: Sequence[JsonObject]) -> list[str]:
    """Events as their JSON text: equal lists mean byte-equal logs."""
    return [dumps(item) for item in events]


def meta(session_id: str, created_at: int = 1000, **extra: Any) -> JsonObject:
    """Session metadata at the suite's cwd."""
    return {"id": session_id, "createdAt": created_at, "cwd": CWD, **extra}


# -- a running harness world ----------------------------------------------------------------------


@dataclass
class World:
    """A root Context with `sessions` and `sessionPersistence` over one backend instance."""

    ctx: Context
    service: SessionPersistenceService
    sessions: SessionStore
    backend: FaultInjector
    clock: FakeClock
    fiber: Fiber


@asynccontextmanager
async def running(
    backend: PersistenceBackend, clock: FakeClock | None = None
) -> AsyncIterator[World]:
    """Mount `sessions` and `sessionPersistence` (over `backend`, fault-injectable) in a root
    Context driven by a fake clock; leaving disposes everything."""
    clock = clock or FakeClock()
    injector = backend if isinstance(backend, FaultInjector) else FaultInjector(backend)

    async def persistence(ctx: Context, config: object) -> Any:
        return await mount_persistence(ctx, injector, Config(), clock=clock)

    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        fiber = ctx.plugin(persistence)
        await fiber
        yield World(ctx, ctx.sessionPersistence, ctx.sessions, injector, clock, fiber)


async def store(world: World, session_id: str, *batches: list[JsonObject], **extra: Any) -> None:
    await world.service.create(meta(session_id, **extra))
    for batch in batches:
        await world.service.append(session_id, batch)


def read_fixture(path: Path) -> tuple[JsonObject, list[JsonObject]]:
    """An original raw log: its header (as meta, without the storage tag) and its events,
    packed chunk rows decoded."""
    lines = path.read_bytes().split(b"\n")
    header = loads(lines[0])
    del header["type"]
    events = [item for line in lines[1:] if line for item in decode_record(loads(line))]
    return header, events
