"""Fakes for driving the seam in tests: a manual clock and a fault-injecting backend wrapper."""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import anyio
import anyio.lowlevel

from ..backend import (
    EncodesAhead,
    JsonObject,
    LiveEncoder,
    Location,
    Owner,
    PersistenceBackend,
    SetAside,
    Snapshot,
    StoredLog,
)


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
    Wrapping a backend that encodes ahead (`EncodesAhead`) makes an `EncodingFaultInjector`, so
    live writes take the inner backend's encoder path with the same faults and records.
    """

    def __new__(cls, inner: PersistenceBackend) -> FaultInjector:
        if cls is FaultInjector and isinstance(inner, EncodesAhead):
            cls = EncodingFaultInjector
        return super().__new__(cls)

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

    async def lock_record(self, session_id: str) -> Owner | None:
        return await self.inner.lock_record(session_id)

    async def delete_stored(self, session_id: str) -> bool:
        return await self.inner.delete_stored(session_id)

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

    async def store_identity(self) -> str:
        return await self.inner.store_identity()

    async def aclose(self) -> None:
        await self.inner.aclose()


class EncodingFaultInjector(FaultInjector):
    """A `FaultInjector` over a backend that encodes ahead: its live encoders are the inner
    backend's, with this wrapper's faults, gate and records around each write."""

    def live_encoder(self) -> LiveEncoder:
        assert isinstance(self.inner, EncodesAhead)
        return _FaultyEncoder(self, self.inner.live_encoder())


class _FaultyEncoder:
    """One live session's inner encoder, its writes passing the injector's gate and fault."""

    __slots__ = ("_injector", "_inner", "admit")

    def __init__(self, injector: FaultInjector, inner: LiveEncoder) -> None:
        self._injector = injector
        self._inner = inner
        self.admit = inner.admit

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        # An encoder's write completes once begun (`LiveEncoder`): the held gate is part of it.
        with anyio.CancelScope(shield=True):
            await self._injector._enter_write()
        await self._inner.append_batch(meta, events, is_materialized=is_materialized)
        self._injector.appends.append(list(events))
