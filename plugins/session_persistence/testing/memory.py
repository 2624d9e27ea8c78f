"""The in-memory reference `PersistenceBackend`: the seam's behaviour without an engine (for the
coordinator's tests and for trying a design out; not a plugin).

Storage is shared between instances through `MemoryStorage`, so "a fresh instance over the same
storage" is `MemoryBackend(storage)`. Events are kept as JSON text, so nothing a caller mutates
afterwards leaks in. Writer locks and the stale-writer check follow docs/backends.md
within one process.
"""

from __future__ import annotations

import builtins
import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from plugins.session.jsonutil import dumps, loads

from ..backend import JsonObject, Location, Owner, SetAside, Snapshot, StoredLog
from ..base import BackendBase
from ..errors import (
    SessionExistsError,
    SessionLockedError,
    SessionPersistenceCorruptionError,
    StaleWriterError,
)

_revisions = itertools.count(1)


@dataclass
class _Log:
    meta: str
    lines: list[str]
    revision: int = field(default_factory=lambda: next(_revisions))
    #: Events after the last complete write: recovered best-effort (a torn tail).
    torn: list[str] | None = None


@dataclass
class MemoryStorage:
    """What several `MemoryBackend` instances share: logs and writer locks."""

    logs: dict[str, _Log] = field(default_factory=dict)
    locks: dict[str, tuple[object, int]] = field(default_factory=dict)
    identity: str = field(default_factory=lambda: uuid.uuid4().hex)

    def tear(self, session_id: str) -> None:
        """Lose the last stored event as a torn write would (the rest reads as recovered)."""
        log = self.logs[session_id]
        log.lines.pop()
        log.torn = []
        log.revision = next(_revisions)

    def corrupt(self, session_id: str, index: int) -> None:
        """Make stored event `index` unparsable."""
        log = self.logs[session_id]
        log.lines[index] = log.lines[index][:-3]
        log.revision = next(_revisions)

    def set_version(self, session_id: str, version: int) -> None:
        log = self.logs[session_id]
        log.meta = dumps({**loads(log.meta), "version": version})
        log.revision = next(_revisions)


class MemoryBackend(BackendBase):
    """Stores logs in a `MemoryStorage`; records every `append_batch` call."""

    name = "session-persistence-memory"

    def __init__(self, storage: MemoryStorage, pid: int = 1) -> None:
        self.storage = storage
        self.pid = pid
        self.batches: list[list[JsonObject]] = []
        self.repairs: list[list[JsonObject]] = []
        self.locks_taken = 0
        self._seen: dict[str, int] = {}
        self.closed = False

    def locate(self, meta: JsonObject) -> Location | None:
        return Location("memory", f"memory://{meta['id']}")

    async def load_stored(self, session_id: str) -> StoredLog | None:
        log = self.storage.logs.get(session_id)
        if log is None:
            return None
        try:
            events = [loads(line) for line in [*log.lines, *(log.torn or [])]]
        except ValueError as error:
            raise SessionPersistenceCorruptionError(f"corrupt session log: {error}") from None
        self._seen[session_id] = len(log.lines)
        marker = None if log.torn is None else len(log.lines)
        return StoredLog(loads(log.meta), events, str(log.revision), marker)

    async def read_stored_revision(self, session_id: str) -> str | None:
        log = self.storage.logs.get(session_id)
        return None if log is None else str(log.revision)

    def _check_lock(self, session_id: str) -> None:
        holder = self.storage.locks.get(session_id)
        if holder is None or holder[0] is not self:
            pid = None if holder is None else holder[1]
            raise SessionLockedError(session_id, pid, "memory")

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        session_id = meta["id"]
        self._check_lock(session_id)
        log = self.storage.logs.get(session_id)
        if not is_materialized:
            if log is not None:
                raise SessionExistsError(f'session "{session_id}" already exists')
            log = self.storage.logs[session_id] = _Log(dumps({"delegationDepth": 0, **meta}), [])
        elif log is None or self._seen.get(session_id) != len(log.lines) or log.torn:
            raise StaleWriterError(session_id)
        self.batches.append(list(events))
        log.lines.extend(dumps(event) for event in events)
        log.revision = next(_revisions)
        self._seen[session_id] = len(log.lines)

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        session_id = meta["id"]
        self._check_lock(session_id)
        log = self.storage.logs[session_id]
        if marker is not None:
            log.lines.extend(log.torn or [])
            log.torn = None
        self.repairs.append(list(closers))
        log.lines.extend(dumps(event) for event in closers)
        log.revision = next(_revisions)
        self._seen[session_id] = len(log.lines)
        return None

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        return [Snapshot(loads(log.meta), str(log.revision)) for log in self.storage.logs.values()]

    async def acquire_writer(self, session_id: str) -> None:
        holder = self.storage.locks.get(session_id)
        if holder is not None and holder[0] is not self:
            raise SessionLockedError(session_id, holder[1], "memory")
        self.storage.locks[session_id] = (self, self.pid)
        self.locks_taken += 1

    async def owner(self, session_id: str) -> Owner | None:
        holder = self.storage.locks.get(session_id)
        if holder is None or holder[0] is self:
            return None
        return Owner(holder[1], "memory")

    async def release_writer(self, session_id: str) -> None:
        holder = self.storage.locks.get(session_id)
        if holder is not None and holder[0] is self:
            del self.storage.locks[session_id]

    async def store_identity(self) -> str:
        return self.storage.identity

    async def aclose(self) -> None:
        for session_id, holder in list(self.storage.locks.items()):
            if holder[0] is self:
                del self.storage.locks[session_id]
        self.closed = True
