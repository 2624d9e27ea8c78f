"""The `sessionPersistence` service and `mount_persistence`, the few lines a backend plugin needs.

A backend plugin's `apply` is::

    async def apply(ctx: Context, config: Config) -> Disposer:
        return await mount_persistence(ctx, MyBackend(config), config)

`mount_persistence` builds the service, wires the live session events (`session/created`,
`session/event`, `session/flush`, `session/disposed`), binds the sessions that are already live,
provides `sessionPersistence` and returns the teardown (drain, release locks, close the backend).
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

from framework import Context, Service
from plugins.session import SessionStore
from plugins.session.hooks import CREATED, DISPOSED, EVENT, FLUSH

from .backend import JsonObject, Location, Owner, PersistenceBackend, SetAside, Snapshot
from .config import Config
from .coordinator import Coordinator
from .session_api import SessionFactory
from .state import SessionLog, SessionPreparation
from .timers import Clock, SystemClock


def _new_session(meta: JsonObject, events: Sequence[JsonObject]) -> Any:
    """An unpublished `plugins.session.Session` seeded with a stored log."""
    from plugins.session import Session

    return Session.from_stored(meta, events)


class _TaskHost:
    """A task group of the service's own, held open by a task the service's context started."""

    def __init__(self) -> None:
        self._group: list[TaskGroup] = []
        self._closed = anyio.Event()

    async def start(self, ctx: Context) -> None:
        self._group.append(await ctx.start(self._run))

    async def _run(self, *, task_status: TaskStatus[TaskGroup]) -> None:
        async with anyio.create_task_group() as group:
            task_status.started(group)
            await self._closed.wait()
            group.cancel_scope.cancel()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Start `fn(*args)` in the service's group (dropped once the service is closed)."""
        if self._group and not self._closed.is_set():
            self._group[0].start_soon(fn, *args)

    def close(self) -> None:
        self._closed.set()


class SessionPersistenceService(Service):
    """`ctx.sessionPersistence`: durable session logs behind one backend (docs/persistence.md)."""

    provide: ClassVar[str] = "sessionPersistence"

    def __init__(
        self,
        ctx: Context,
        backend: PersistenceBackend,
        config: Config,
        *,
        clock: Clock | None = None,
        new_session: SessionFactory = _new_session,
    ) -> None:
        super().__init__(ctx, config)
        self.backend = backend
        self._host = _TaskHost()
        self._coordinator = Coordinator(
            backend,
            config,
            new_session=new_session,
            spawn=self._host.spawn,
            clock=clock or SystemClock(),
        )

    # -- reads and writes -----------------------------------------------------------------------

    def locate(self, meta: JsonObject) -> Location | None:
        """Where `meta`'s session lives (`kind`, `path`), or None; no I/O."""
        return self.backend.locate(meta)

    async def read_raw(self, session_id: str) -> bytes:
        """The stored artifact verbatim (JSONL); other backends refuse."""
        return await self.backend.read_raw(session_id)

    async def create(self, meta: JsonObject) -> None:
        """Record a new session; it is materialized by its first append."""
        await self._coordinator.create(meta)

    async def append(self, session_id: str, events: Sequence[JsonObject]) -> None:
        """Append events whose seqs continue the log; returns once they are durable."""
        await self._coordinator.append(session_id, events)

    async def prepare(self, session_id: str) -> SessionPreparation:
        """Repair and reserve a stored session; publish `.session` or `.release()` it."""
        return await self._coordinator.prepare(session_id)

    async def load(self, session_id: str) -> SessionLog:
        """The balanced log, committing any repair first."""
        return await self._coordinator.load(session_id)

    async def inspect(self, session_id: str) -> SessionLog:
        """The balanced log, repaired in memory only."""
        return await self._coordinator.inspect(session_id)

    async def inspect_batch(
        self, session_ids: Sequence[str]
    ) -> builtins.list[SessionLog | Exception]:
        """`inspect` of the first of `session_ids` and of as many after it as the
        backend reads in one call (a listing's reads, docs/performance.md); per id, in order,
        its log or the error its `inspect` raises. Ask again for the ids not answered."""
        return await self._coordinator.inspect_batch(session_ids)

    async def read_from(self, session_id: str, from_seq: int) -> Sequence[JsonObject]:
        """The stored events from `from_seq` on (empty past the end; read-only)."""
        return await self._coordinator.read_from(session_id, from_seq)

    async def delete(self, session_id: str) -> None:
        """Remove a stored session (events, header, bytes repairs set aside). Refused while it
        is live here, `SessionLockedError` while another process runs it, `SessionNotFoundError`
        when nothing is stored."""
        await self._coordinator.delete(session_id)

    async def list(self) -> list[JsonObject]:
        """Headers of the materialized sessions, ordered by `(createdAt, id)`."""
        return await self._coordinator.headers()

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        """Headers with opaque revisions."""
        return await self._coordinator.snapshots()

    def set_aside(self, session_id: str) -> tuple[SetAside, ...]:
        """What repairs made through this service cut from `session_id`'s log and kept beside
        it (`path`, `size` in bytes), oldest first."""
        return self._coordinator.set_aside(session_id)

    async def owner(self, session_id: str) -> Owner | None:
        """The live writer running `session_id` in another process (pid and host), or None
        when no other writer holds it; reads only."""
        return await self._coordinator.owner(session_id)

    async def owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        """`owner` of many ids in one probe where the backend can (a listing); an id whose
        probe failed is left out (its `owner` raises why)."""
        return await self._coordinator.owners(session_ids)

    async def stale_lock(self, session_id: str) -> Owner | None:
        """The holder a lock record names although nobody holds the lock any more (a writer
        that died), or None; the next writer takes such a lock over. Reads only."""
        if self._coordinator.locks.holds(session_id):
            return None
        record = await self.backend.lock_record(session_id)
        if record is None or await self.owner(session_id) is not None:
            return None
        return record

    async def identity(self) -> str:
        """The store's random id, persisted once in the store (see `PersistenceBackend`)."""
        return await self.backend.store_identity()

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the service's task group (timers, inits, retirements)."""
        await self._host.start(self.ctx)

    async def aclose(self) -> None:
        """Drain every live buffer, release locks and close the backend.

        Raises `ExceptionGroup('<backend> dispose failed', errors)` when anything failed.
        """
        try:
            await self._coordinator.aclose()
        finally:
            self._host.close()


async def mount_persistence(
    ctx: Context,
    backend: PersistenceBackend,
    config: Config,
    *,
    clock: Clock | None = None,
) -> Callable[[], Awaitable[None]]:
    """Provide `sessionPersistence` over `backend` from a plugin's `apply`; returns its teardown.

    `clock` times the batching window (default: the event loop's; tests pass a fake one).
    """
    service = SessionPersistenceService(ctx, backend, config, clock=clock)
    await service.start()
    try:
        live = service._coordinator.live
        ctx.on(CREATED, live.on_created)
        ctx.on(EVENT, live.on_event)
        ctx.on(FLUSH, live.on_flush)
        ctx.on(DISPOSED, live.on_disposed)
        sessions = ctx.get(SessionStore)
        if sessions is not None:
            for session in sessions.list():
                live.on_created(session)
        ctx.provide(SessionPersistenceService.provide, service)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await service.aclose()
        raise
    return service.aclose
