"""The write coordinator: per-id ordering, adoption, repair and live wiring, in three parts.

`ColdStore` (`cold.py`) holds the operations on stored logs, `LiveSessions` (`live.py`) the live
bindings and their batched writes, `WriterLocks` (`locks.py`) the cross-process lock
bookkeeping; they share one `SessionTable` (`state.py`). A backend only stores and reads; every
decision is made here or in the seam's rule modules (docs/persistence.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from itertools import takewhile

from plugins.session.eventlog import EventLog
from plugins.session.repair import interrupted_turn_closers

from .backend import JsonObject, Owner, PersistenceBackend, SetAside, Snapshot
from .cold import ColdStore
from .config import Config
from .errors import SessionNotFoundError, SessionPersistenceError
from .inline import Inlining
from .live import LiveSessions
from .locks import WriterLocks
from .session_api import SessionFactory
from .state import SessionLog, SessionPreparation, SessionTable
from .timers import Clock, Spawn, Timers

__all__ = ["Coordinator", "SessionLog", "SessionPreparation"]


class Coordinator:
    """Serializes every operation on a session id and decides adoption, repair and ownership."""

    def __init__(
        self,
        backend: PersistenceBackend,
        config: Config,
        *,
        new_session: SessionFactory,
        spawn: Spawn,
        clock: Clock,
    ) -> None:
        self.backend = backend
        self.config = config
        self.table = SessionTable()
        self.locks = WriterLocks(backend)
        self.cold = ColdStore(backend, config, self.table, self.locks, new_session)
        timers = Timers(clock, config.write_batch_max_delay_ms / 1000, spawn)
        self.live = LiveSessions(backend, self.table, self.locks, self.cold, timers, spawn)
        if isinstance(backend, Inlining):
            backend.inline_gate.watch(self.live.bindings.__len__)  # no Python frame per flush

    # -- stored sessions ------------------------------------------------------------------------

    async def create(self, meta: JsonObject) -> None:
        await self.cold.create(meta)

    async def append(self, session_id: str, events: Sequence[JsonObject]) -> None:
        await self.cold.append(session_id, events)

    async def prepare(self, session_id: str) -> SessionPreparation:
        return await self.cold.prepare(session_id)

    async def read_from(self, session_id: str, from_seq: object) -> Sequence[JsonObject]:
        return await self.cold.read_from(session_id, from_seq)

    async def delete(self, session_id: str) -> None:
        await self.cold.delete(session_id)

    async def headers(self) -> list[JsonObject]:
        return await self.cold.headers()

    async def snapshots(self) -> list[Snapshot]:
        return await self.cold.snapshots()

    def set_aside(self, session_id: str) -> tuple[SetAside, ...]:
        """What repairs by this process cut from `session_id`'s log and kept beside it."""
        return tuple(self.table.set_aside.get(session_id, ()))

    async def owner(self, session_id: str) -> Owner | None:
        """The live writer of `session_id` in another process, or None."""
        return await self.locks.owner(session_id)

    async def owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        """`owner` of each id, probed together; an id whose probe failed is left out."""
        return await self.locks.owners(session_ids)

    # -- stored or live -------------------------------------------------------------------------

    async def load(self, session_id: str) -> SessionLog:
        """The balanced log: a live one after a flush, else stored with its repair committed."""
        await self.table.wait_retirement(session_id)
        async with self.table.ticket(session_id):
            binding = self.table.live(session_id)
            if binding is None:
                _, prepared = await self.cold.commit(session_id)
                return prepared.log()
        await self.live.flush(binding)
        entry = binding.entry
        if entry is None or not entry.materialized:
            raise SessionNotFoundError(session_id)
        events = EventLog(binding.session.events)
        if interrupted_turn_closers(events):
            raise SessionPersistenceError(
                f'cannot load session "{session_id}" while its live turn is open; use the '
                "live Session or wait for the turn to close"
            )
        return SessionLog(dict(entry.meta), events)

    async def inspect(self, session_id: str) -> SessionLog:
        """The balanced log without writing anything (a live session: its unflushed events)."""
        await self.table.wait_retirement(session_id)
        async with self.table.ticket(session_id):
            return await self._inspect(session_id)

    async def inspect_batch(self, session_ids: Sequence[str]) -> list[SessionLog | Exception]:
        """`inspect` of the first of `session_ids` and of as many after it as the
        backend reads in one call (none live here or cached); per id, in order, its log or the
        error its `inspect` raises. Their tickets are taken in id order (no two batches wait on
        each other)."""
        for session_id in session_ids:
            await self.table.wait_retirement(session_id)
        async with AsyncExitStack() as stack:
            for session_id in sorted(set(session_ids)):
                await stack.enter_async_context(self.table.ticket(session_id))
            run = list(
                takewhile(
                    lambda i: self.table.live(i) is None and not self.cold.cached(i), session_ids
                )
            )
            if not run:
                try:
                    return [await self._inspect(session_ids[0])]
                except Exception as error:
                    return [error]
            found = await self.cold.inspect_cold(run)
            return [item if isinstance(item, Exception) else item.log() for item in found]

    async def _inspect(self, session_id: str) -> SessionLog:
        """`inspect` under the id's ticket."""
        binding = self.table.live(session_id)
        if binding is not None:
            live = binding.session
            return SessionLog(dict(live.header), EventLog(live.events))
        prepared = await self.cold.prepared(session_id)
        self.cold.remember(session_id, prepared)
        return prepared.log()

    # -- teardown -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Drain every live buffer, release locks, close the backend; failures are grouped."""
        errors = await self.live.drain()
        errors += await self.locks.release_all()
        self.live.clear()
        self.table.entries.clear()
        self.cold.clear()
        try:
            await self.backend.aclose()
        except Exception as error:
            errors.append(error)
        if errors:
            raise ExceptionGroup(f"{self.backend.name} dispose failed", errors)
