"""Cold operations on stored sessions: create, append, prepare, load, inspect, read, list.

Each runs in its id's queue (`state.SessionTable`). A cold prepare reads, checks and balances a
stored log; a commit refuses a live owner, starts over if the revision moved and writes the
repair first (rules 4 and 5 of docs/persistence.md).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from plugins.session.eventlog import EventLog, plain_events
from plugins.session.events import LogValidator
from plugins.session.jsonutil import MAX_SAFE_INTEGER, snapshot
from plugins.session.repair import TurnFold

from .backend import (
    JsonObject,
    LiveEncoder,
    LoadsMany,
    PersistenceBackend,
    SetAside,
    Snapshot,
    StoredLog,
)
from .config import Config
from .errors import (
    SessionExistsError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)
from .formats import check_readable, js_text, refuse_retired, refuse_unknown
from .legacy import Upgrade, upgradable, upgrade_stored
from .locks import WriterLocks
from .session_api import SessionFactory
from .state import Entry, SessionLog, SessionPreparation, SessionTable


@dataclass(eq=False, slots=True)
class Prepared:
    """A cold-prepared stored log: `events` are the stored ones plus `closers` (read-only: the
    log, a session and the cache share them)."""

    meta: JsonObject
    events: Sequence[JsonObject]
    closers: list[JsonObject]
    revision: str
    torn_marker: object | None
    torn_bytes: int = 0
    set_aside: tuple[SetAside, ...] = ()

    def log(self) -> SessionLog:
        return SessionLog(self.meta, self.events, self.torn_bytes, self.set_aside)


async def _caught(
    read: Callable[[str], Awaitable[StoredLog | None]], session_id: str
) -> StoredLog | Exception | None:
    """`read(session_id)`, or the error it raised."""
    try:
        return await read(session_id)
    except Exception as error:
        return error


#: `PersistenceBackend.append_batch`, or a live encoder's.
AppendBatch = Callable[..., Awaitable[None]]


def _advance(entry: Entry, count: int) -> None:
    """`count` events appended durably after `entry`'s cursor: it is materialized now."""
    entry.materialized = True
    entry.cursor += count


async def _append_advancing(
    append: AppendBatch,
    entry: Entry,
    meta: JsonObject,
    events: list[JsonObject],
    materialized: bool,
) -> None:
    """`append` the events, then advance `entry` (a write `WriterLocks.locked` runs)."""
    await append(meta, events, is_materialized=materialized)
    _advance(entry, len(events))


def is_safe_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def check_seqs(session_id: str, cursor: int, batch: Sequence[JsonObject]) -> None:
    """A batch must continue the log at `cursor` without gaps: checked here once, for every
    backend."""
    for index, event in enumerate(batch):
        seq = event.get("seq")
        if type(seq) is not int or seq != cursor + index:
            got = js_text(seq) if "seq" in event else "undefined"
            raise SessionPersistenceError(
                f'append seq mismatch for "{session_id}": expected {cursor + index} at '
                f"index {index}, got {got}"
            )


class ColdStore:
    """The stored side of the coordinator: validation, repair, durable appends."""

    def __init__(
        self,
        backend: PersistenceBackend,
        config: Config,
        table: SessionTable,
        locks: WriterLocks,
        new_session: SessionFactory,
    ) -> None:
        self.backend = backend
        self.config = config
        self.table = table
        self.locks = locks
        self._new_session = new_session
        self._cache: OrderedDict[str, Prepared] = OrderedDict()

    # -- reading and checking -------------------------------------------------------------------

    def check(
        self, session_id: str, stored: StoredLog | None
    ) -> tuple[StoredLog, list[JsonObject]]:
        """A log as the backend read it (None: `SessionNotFoundError`), upgraded
        (docs/legacy-logs.md) and checked, and the closers that balance it. One walk over its
        plain events decodes each once and keeps none, unless an upgrade changes one
        (docs/performance.md). What the walk meets is raised in the order of the rules: the
        legacy refusals first (anywhere in the log), then the format refusals, then validation
        (docs/event-log.md)."""
        if stored is None:
            raise SessionNotFoundError(session_id)
        meta = stored.meta
        location = self.backend.locate(meta)
        check_readable(session_id, meta, location)
        upgrade = Upgrade(session_id, stored.events) if upgradable(session_id, meta) else None
        unknown: SessionPersistenceError | None = None
        failure: Exception | None = None
        validator: LogValidator | None = None
        try:
            validator = LogValidator(meta, stored.events)
        except Exception as error:
            failure = error
        turn = TurnFold()
        for index, event in plain_events(stored.events):
            if upgrade is not None:
                upgraded = upgrade.add(index, event)
                if upgraded is not event and validator is not None:
                    validator.events = upgrade.events  # the first change made them a list
                event = upgraded
            if unknown is not None:
                continue
            try:
                refuse_unknown(session_id, event, location)
            except SessionPersistenceError as error:
                unknown = error
                continue
            if validator is None:
                continue
            try:
                validator.check(index, event)
            except Exception as error:
                failure, validator = error, None
                continue
            turn.add(event)
        events = stored.events if upgrade is None else upgrade.result()
        if unknown is not None:
            raise unknown
        if failure is not None:
            raise SessionPersistenceCorruptionError(
                f'stored session "{session_id}" failed validation: {failure}'
            ) from failure
        if events is not stored.events:
            stored = dataclasses.replace(stored, events=events)
        return stored, turn.closers(events[-1] if events else None)

    async def read_stored(self, session_id: str) -> StoredLog | None:
        """What every read of a stored log goes through: its legacy shapes upgraded in memory
        (docs/legacy-logs.md); None when nothing is stored."""
        return upgrade_stored(session_id, await self.backend.load_stored(session_id))

    async def load_stored(self, session_id: str) -> StoredLog:
        """`read_stored`, or `SessionNotFoundError`."""
        stored = await self.read_stored(session_id)
        if stored is None:
            raise SessionNotFoundError(session_id)
        return stored

    async def read_checked(self, session_id: str) -> tuple[StoredLog, list[JsonObject]]:
        """`check` of the stored log."""
        return self.check(session_id, await self.backend.load_stored(session_id))

    def cached(self, session_id: str) -> bool:
        """Whether a preparation of `session_id` is remembered (`prepared` checks it)."""
        return session_id in self._cache

    async def _cold_prepare(self, session_id: str) -> Prepared:
        """Read, validate and balance a stored log (rule 4)."""
        return self._prepare(session_id, await self.backend.load_stored(session_id))

    async def inspect_cold(self, session_ids: Sequence[str]) -> list[Prepared | Exception]:
        """The cold prepare, remembered, of the first of `session_ids` and of as many after
        it as the backend reads in one call (`LoadsMany`); per id, its preparation or the error
        preparing it raised. Each id's ticket is held; none is live or cached."""
        if isinstance(self.backend, LoadsMany):
            read = await self.backend.load_many(session_ids)
        else:
            read = [await _caught(self.backend.load_stored, session_ids[0])]
        found: list[Prepared | Exception] = []
        for session_id, stored in zip(session_ids, read, strict=False):
            try:
                if isinstance(stored, Exception):
                    raise stored
                prepared = self._prepare(session_id, stored)
            except Exception as error:
                found.append(error)
                continue
            self.remember(session_id, prepared)
            found.append(prepared)
        return found

    def _prepare(self, session_id: str, stored: StoredLog | None) -> Prepared:
        """Validate and balance a log the backend read (rule 4)."""
        stored, closers = self.check(session_id, stored)
        return Prepared(
            stored.meta,
            EventLog(stored.events, closers),
            closers,
            stored.revision,
            stored.torn_marker,
            stored.torn_bytes,
            stored.set_aside,
        )

    async def prepared(self, session_id: str) -> Prepared:
        """The cached preparation if its revision still holds, else a cold prepare."""
        cached = self._cache.pop(session_id, None)
        revision = None if cached is None else await self.backend.read_stored_revision(session_id)
        if cached is not None and revision == cached.revision:
            return cached
        return await self._cold_prepare(session_id)

    def remember(self, session_id: str, prepared: Prepared) -> None:
        size = self.config.prepared_session_cache_size
        if size <= 0:
            return
        self._cache[session_id] = prepared
        self._cache.move_to_end(session_id)
        while len(self._cache) > size:
            self._cache.popitem(last=False)

    def forget(self, session_id: str) -> None:
        self._cache.pop(session_id, None)

    def clear(self) -> None:
        self._cache.clear()

    # -- committing -----------------------------------------------------------------------------

    async def commit(self, session_id: str) -> tuple[Entry, Prepared]:
        """Rule 5: refuse a live owner, start over if the revision moved, repair, then track."""
        prepared = await self.prepared(session_id)
        while True:
            entry = self.table.entries.get(session_id)
            if entry is not None and entry.binding is not None:
                raise SessionPersistenceError(
                    f'session "{session_id}" already has a live persistence owner'
                )
            if await self.backend.read_stored_revision(session_id) != prepared.revision:
                prepared = await self._cold_prepare(session_id)
                continue
            if prepared.torn_marker is not None or prepared.closers:
                repaired = await self.locks.locked(session_id, partial(self._repair, prepared))
                prepared = repaired or await self._cold_prepare(session_id)
                continue
            if entry is None:
                entry = self.table.entries[session_id] = Entry(prepared.meta)
            entry.meta = prepared.meta
            entry.cursor = len(prepared.events)
            entry.materialized = True
            return entry, prepared

    async def _repair(self, prepared: Prepared) -> Prepared | None:
        """Commit the repair. Under the same writer lock the log now holds exactly the prepared
        events (no tail, no closers due), at the revision read here: the next round only checks
        that revision instead of reading and validating the whole log again. None when the log
        is gone."""
        kept = await self.backend.commit_repair(
            prepared.meta, prepared.torn_marker, prepared.closers
        )
        self.table.kept(prepared.meta["id"], kept)
        revision = await self.backend.read_stored_revision(prepared.meta["id"])
        if revision is None:
            return None
        set_aside = prepared.set_aside if kept is None else (*prepared.set_aside, kept)
        return Prepared(prepared.meta, prepared.events, [], revision, None, 0, set_aside)

    async def append_durably(
        self, entry: Entry, events: list[JsonObject], encoder: LiveEncoder | None = None
    ) -> None:
        """`append_batch` under the writer lock, shielded; then advance the cursor. A live
        binding's writes go through its `encoder` when it has one; under a held lock they need
        no shield of their own (an encoder's write completes once begun: `LiveEncoder`)."""
        session_id = entry.meta["id"]
        if encoder is not None and self.locks.holds(session_id):
            # The live path awaits the write itself: no closure for `locked`, and one
            # coroutine less held while the write waits (docs/performance.md).
            await encoder.append_batch(entry.meta, events, is_materialized=entry.materialized)
            _advance(entry, len(events))
        else:
            append = self.backend.append_batch if encoder is None else encoder.append_batch
            meta, materialized = entry.meta, entry.materialized
            write = partial(_append_advancing, append, entry, meta, events, materialized)
            await self.locks.locked(session_id, write)
        self._cache.pop(session_id, None)

    # -- operations -----------------------------------------------------------------------------

    async def create(self, meta: JsonObject) -> None:
        """Record the intent to create a session (rule 2); nothing is written until an append."""
        if type(meta) is not dict:
            raise TypeError("session metadata must be losslessly JSON-serializable")
        if not is_safe_count(meta.get("createdAt")):
            raise TypeError("session metadata createdAt must be a non-negative safe integer")
        try:
            header = snapshot(meta)
        except TypeError:
            raise TypeError("session metadata must be losslessly JSON-serializable") from None
        session_id = header.get("id")
        if type(session_id) is not str or not session_id:
            raise TypeError("session metadata id must be a non-empty string")
        header = {"version": 0, **header}
        async with self.table.ticket(session_id):
            if session_id in self.table.entries:
                raise SessionExistsError(f'session "{session_id}" already exists in this backend')
            if await self.backend.read_stored_revision(session_id) is not None:
                raise SessionExistsError(
                    f'session "{session_id}" already has a persisted log on disk; '
                    "load/resume it instead of creating"
                )
            self.table.entries[session_id] = Entry(header)

    async def append(self, session_id: str, events: Sequence[JsonObject]) -> None:
        """Append `events` durably (rule 3); returns once they are durable."""
        try:
            batch: list[JsonObject] = snapshot(list(events))
        except TypeError:
            raise TypeError(
                "session event batch is not losslessly JSON-serializable because it contains "
                "non-JSON-serializable data"
            ) from None
        for event in batch:
            if type(event) is not dict:
                raise TypeError(f'session "{session_id}" events must be JSON objects')
            refuse_retired(event)
        if not batch:
            return
        async with self.table.ticket(session_id):
            entry = self.table.entries.get(session_id)
            if entry is not None and entry.reserved is not None:
                raise SessionPersistenceError(
                    f'cannot append session "{session_id}" while its persisted preparation is '
                    "reserved"
                )
            if entry is None:
                entry, _ = await self.commit(session_id)
            check_seqs(session_id, entry.cursor, batch)
            await self.append_durably(entry, batch)

    async def prepare(self, session_id: str) -> SessionPreparation:
        """Commit (repairing if needed) and reserve a stored session for publication."""
        await self.table.wait_retirement(session_id)
        async with self.table.ticket(session_id):
            entry = self.table.entries.get(session_id)
            if self.table.live(session_id) is not None:
                raise SessionPersistenceError(
                    f'cannot prepare session "{session_id}" while it is live'
                )
            if entry is not None and entry.reserved is not None:
                raise SessionPersistenceError(
                    f'cannot prepare session "{session_id}" while its persisted preparation is '
                    "reserved"
                )
            entry, prepared = await self.commit(session_id)
            try:
                session = self._new_session(prepared.meta, prepared.events)
            except Exception as error:
                raise SessionPersistenceCorruptionError(
                    f'stored session "{session_id}" failed validation: {error}'
                ) from error
            reserved_entry = entry

            def release() -> None:
                if reserved_entry.reserved is preparation:
                    reserved_entry.reserved = None

            preparation = SessionPreparation(session, release)
            entry.reserved = preparation
            return preparation

    async def delete(self, session_id: str) -> None:
        """Remove a stored session under its writer lock: refused while this process runs it
        live or holds its preparation, and (`SessionLockedError`) while another process does."""
        await self.table.wait_retirement(session_id)
        async with self.table.ticket(session_id):
            entry = self.table.entries.get(session_id)
            if self.table.live(session_id) is not None or (
                entry is not None and entry.reserved is not None
            ):
                raise SessionPersistenceError(
                    f'cannot delete session "{session_id}" while it is live in this process'
                )
            delete = partial(self.backend.delete_stored, session_id)
            deleted = await self.locks.locked(session_id, delete)
            self.table.entries.pop(session_id, None)
            self.table.set_aside.pop(session_id, None)
            self.forget(session_id)
        if not deleted:
            raise SessionNotFoundError(session_id)

    async def read_from(self, session_id: str, from_seq: object) -> Sequence[JsonObject]:
        """The stored events from `from_seq` on: no closers, no torn bytes, `[]` past the end."""
        if not is_safe_count(from_seq):
            raise TypeError(
                f"readFrom fromSeq must be a non-negative safe integer, got {js_text(from_seq)}"
            )
        assert isinstance(from_seq, int)
        await self.table.wait_retirement(session_id)
        async with self.table.ticket(session_id):
            stored = await self.load_stored(session_id)
        return stored.events[from_seq:]

    async def headers(self) -> list[JsonObject]:
        """Materialized headers ordered by `(createdAt, id)`."""
        headers = await self.backend.list()
        return sorted(headers, key=lambda h: (h["createdAt"], h["id"]))

    async def snapshots(self) -> list[Snapshot]:
        return await self.backend.list_snapshots()
