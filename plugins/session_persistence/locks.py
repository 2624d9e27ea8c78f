"""The coordinator's writer-lock bookkeeping: which ids this process holds for live sessions,
and running one write under the lock (docs/persistence.md).

A live binding holds its id's lock from binding to retirement (`hold` / `unhold`); any other
write takes the lock for that write only (`locked`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TypeVar

import anyio

from .backend import Owner, PersistenceBackend, ProbesOwners
from .errors import SessionPersistenceError

T = TypeVar("T")


class WriterLocks:
    """The ids whose live writer lock this process holds, over one backend's lock engine."""

    def __init__(self, backend: PersistenceBackend) -> None:
        self._backend = backend
        self._held: set[str] = set()

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    async def locked(self, session_id: str, write: Callable[[], Awaitable[T]]) -> T:
        """Run a write under the writer lock: the live one if held, else taken for this write.
        Shielded: a cancelled caller never leaves a write half done or a lock behind."""
        with anyio.CancelScope(shield=True):
            if session_id in self._held:
                result = await write()
            else:
                await self._backend.acquire_writer(session_id)
                try:
                    result = await write()
                finally:
                    await self._backend.release_writer(session_id)
        return result

    async def hold(self, session_id: str) -> None:
        """Take the writer lock for a live binding (kept until `unhold`)."""
        if session_id not in self._held:
            await self._backend.acquire_writer(session_id)
            self._held.add(session_id)

    async def unhold(self, session_id: str) -> None:
        if session_id in self._held:
            self._held.discard(session_id)
            with anyio.CancelScope(shield=True):
                await self._backend.release_writer(session_id)

    async def owner(self, session_id: str) -> Owner | None:
        """Who else holds `session_id` live (None when free or held by this process)."""
        if session_id in self._held:
            return None
        return await self._backend.owner(session_id)

    async def owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        """`owner` of each id, in one probe where the backend can (`ProbesOwners`); an id
        whose probe failed is left out (its `owner` raises why)."""
        probed = [i for i in session_ids if i not in self._held]
        found: dict[str, Owner | None] = {}
        if isinstance(self._backend, ProbesOwners):
            found = await self._backend.owners(probed)
        else:
            for session_id in probed:
                with suppress(SessionPersistenceError):
                    found[session_id] = await self._backend.owner(session_id)
        return {i: found.get(i) for i in session_ids if i in self._held or i in found}

    async def release_all(self) -> list[Exception]:
        """Release every held lock; the failures, in order."""
        errors: list[Exception] = []
        for session_id in list(self._held):
            try:
                await self.unhold(session_id)
            except Exception as error:
                errors.append(error)
        return errors
