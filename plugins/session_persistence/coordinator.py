"""The write coordinator: per-id ordering, adoption, repair, live wiring (spec 02 §4.1, §4.2, §6).

A backend only stores and reads; every decision is made here. Each session id has a FIFO queue
(`FifoLock`): one operation at a time, in arrival order, and a failed one does not block the
next. The coordinator tracks, per id, what this process knows of its storage (`_Entry`: header,
durable cursor, whether it is materialized) and which live Session (if any) owns it (`_Binding`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio

from plugins.session.events import KNOWN_EVENT_TYPES, validate_log
from plugins.session.jsonutil import MAX_SAFE_INTEGER, dumps, snapshot
from plugins.session.repair import interrupted_turn_closers

from .backend import JsonObject, Location, PersistenceBackend, Snapshot, StoredLog
from .config import Config
from .errors import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)
from .fifo import FifoLock, Ticket
from .legacy import upgrade_stored
from .session_api import LiveSession, SessionFactory
from .timers import Clock, Spawn, Timers
from .writer import WriteController

logger = logging.getLogger("plugins.session_persistence")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A session as read: its header and its events (balanced unless said otherwise)."""

    header: JsonObject
    events: list[JsonObject]


class SessionPreparation:
    """A stored session prepared for resumption: an unpublished `session` and its reservation.

    Publish the session through the session store (`session/created` binds it to this backend
    and appends what it added, its `session/end-seed`), or `release()` the reservation.
    """

    __slots__ = ("_release", "session")

    def __init__(self, session: Any, release: Callable[[], None]) -> None:
        self.session = session
        self._release = release

    def release(self) -> None:
        """Give the reservation up (no-op once published or released)."""
        self._release()


@dataclass(eq=False, slots=True)
class _Prepared:
    """A cold-prepared stored log: `events` are the stored ones plus `closers`."""

    meta: JsonObject
    events: list[JsonObject]
    closers: list[JsonObject]
    revision: str
    torn_marker: object | None


@dataclass(eq=False, slots=True)
class _Entry:
    """What this process knows of one id's storage."""

    meta: JsonObject
    cursor: int = 0
    materialized: bool = False
    binding: _Binding | None = None
    reserved: SessionPreparation | None = None


@dataclass(eq=False, slots=True)
class _Binding:
    """One live Session wired to this backend."""

    session: LiveSession
    ready: anyio.Event
    controller: WriteController = field(init=False)
    entry: _Entry | None = None
    error: Exception | None = None
    detached: bool = False


@dataclass(eq=False, slots=True)
class _Retirement:
    done: anyio.Event = field(default_factory=anyio.Event)


def _is_safe_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def _js_text(value: object) -> str:
    """How a JavaScript template literal renders a JSON-ish value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _refuse_retired(event: JsonObject) -> None:
    """Shapes §1 retired: `request/header-delta` and a `request/header` of reason "fallback"."""
    kind = event.get("type")
    if kind == "request/header-delta":
        raise SessionPersistenceError(
            f'event type "request/header-delta" (seq {_js_text(event.get("seq"))}) is refused: '
            "it was retired; request/header replaces it"
        )
    if kind == "request/header":
        data = event.get("data")
        if isinstance(data, dict) and data.get("reason") == "fallback":
            raise SessionPersistenceError(
                f'event "request/header" (seq {_js_text(event.get("seq"))}) reason "fallback" '
                "is retired and refused"
            )


def _same_json(left: Sequence[JsonObject], right: Sequence[JsonObject]) -> bool:
    return len(left) == len(right) and all(
        a is b or dumps(a) == dumps(b) for a, b in zip(left, right, strict=True)
    )


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
        self._new_session = new_session
        self._spawn = spawn
        self._timers = Timers(clock, config.write_batch_max_delay_ms / 1000, spawn)
        self._entries: dict[str, _Entry] = {}
        self._queues: dict[str, FifoLock] = {}
        #: Live bindings by `id(session)`: the `session/event` hot path is one dict lookup.
        self._bindings: dict[int, _Binding] = {}
        #: Bindings whose init failed, by `id(session)`: their flushes re-raise the failure.
        self._failed: dict[int, _Binding] = {}
        #: Ids whose live writer lock this process holds.
        self._held: set[str] = set()
        self._retiring: dict[str, _Retirement] = {}
        #: Bindings whose retirement failed: teardown drains them again.
        self._unretired: list[_Binding] = []
        self._cache: OrderedDict[str, _Prepared] = OrderedDict()

    # -- per-id FIFO queue ----------------------------------------------------------------------

    def _ticket(self, session_id: str) -> Ticket:
        queue = self._queues.get(session_id)
        if queue is None:
            queue = FifoLock(on_idle=partial(self._forget_queue, session_id))
            self._queues[session_id] = queue
        return queue.ticket()

    def _forget_queue(self, session_id: str) -> None:
        del self._queues[session_id]

    async def _wait_retirement(self, session_id: str) -> None:
        retirement = self._retiring.get(session_id)
        if retirement is not None:
            await retirement.done.wait()

    # -- storage helpers ------------------------------------------------------------------------

    def _located(self, meta: JsonObject) -> str:
        location: Location | None = self.backend.locate(meta)
        return "" if location is None else f" (raw log: {location.path})"

    def _check_format(self, session_id: str, stored: StoredLog) -> None:
        """Identity, version and event-type refusals of a cold prepare (§4.1 rule 4)."""
        meta = stored.meta
        if meta.get("id") != session_id:
            raise SessionPersistenceCorruptionError(
                f'stored session identity mismatch: requested "{session_id}", '
                f'header contains "{_js_text(meta.get("id"))}"'
            )
        version = meta.get("version")
        if type(version) is int and version > 0:
            raise SessionFormatUnsupportedError(
                f'session "{session_id}" uses log format v{version}, but this harness reads only '
                "v0: the log was written by a newer harness — upgrade the harness to open it"
                + self._located(meta)
            )
        if type(version) is int and version < 0:
            raise SessionFormatUnsupportedError(
                f'session "{session_id}" uses log format v{version}, older than the supported '
                "v0, and this build ships no upgrade path for it" + self._located(meta)
            )
        for event in stored.events:
            kind = event.get("type")
            if kind not in KNOWN_EVENT_TYPES and event.get("ignorable") is not True:
                raise SessionFormatUnsupportedError(
                    f'session "{session_id}" contains event type "{_js_text(kind)}" '
                    f"(seq {_js_text(event.get('seq'))}) unknown to this harness and not marked "
                    "ignorable; refusing to interpret the log — it was likely written by a "
                    "newer harness" + self._located(meta)
                )

    def _validate(self, session_id: str, stored: StoredLog) -> None:
        self._check_format(session_id, stored)
        try:
            validate_log(stored.meta, stored.events)
        except Exception as error:
            raise SessionPersistenceCorruptionError(
                f'stored session "{session_id}" failed validation: {error}'
            ) from error

    async def _load_stored(self, session_id: str) -> StoredLog | None:
        """What every read of a stored log goes through: its legacy shapes upgraded in memory."""
        return upgrade_stored(session_id, await self.backend.load_stored(session_id))

    async def _cold_prepare(self, session_id: str) -> _Prepared:
        """Read, validate and balance a stored log (rule 4)."""
        stored = await self._load_stored(session_id)
        if stored is None:
            raise SessionPersistenceError(f'session "{session_id}" not found')
        self._validate(session_id, stored)
        closers = interrupted_turn_closers(stored.events)
        events = [*stored.events, *closers]
        return _Prepared(stored.meta, events, closers, stored.revision, stored.torn_marker)

    async def _prepared(self, session_id: str) -> _Prepared:
        """The cached preparation if its revision still holds, else a cold prepare."""
        cached = self._cache.pop(session_id, None)
        revision = None if cached is None else await self.backend.read_stored_revision(session_id)
        if cached is not None and revision == cached.revision:
            return cached
        return await self._cold_prepare(session_id)

    def _remember(self, session_id: str, prepared: _Prepared) -> None:
        size = self.config.prepared_session_cache_size
        if size <= 0:
            return
        self._cache[session_id] = prepared
        self._cache.move_to_end(session_id)
        while len(self._cache) > size:
            self._cache.popitem(last=False)

    async def _locked(self, session_id: str, write: Callable[[], Awaitable[T]]) -> T:
        """Run a write under the writer lock: the live one if held, else taken for this write."""
        with anyio.CancelScope(shield=True):
            if session_id in self._held:
                result = await write()
            else:
                await self.backend.acquire_writer(session_id)
                try:
                    result = await write()
                finally:
                    await self.backend.release_writer(session_id)
        return result

    async def _hold(self, session_id: str) -> None:
        """Take the writer lock for a live binding (kept until retirement)."""
        if session_id not in self._held:
            await self.backend.acquire_writer(session_id)
            self._held.add(session_id)

    async def _unhold(self, session_id: str) -> None:
        if session_id in self._held:
            self._held.discard(session_id)
            with anyio.CancelScope(shield=True):
                await self.backend.release_writer(session_id)

    async def _commit(self, session_id: str) -> tuple[_Entry, _Prepared]:
        """Rule 5: refuse a live owner, start over if the revision moved, repair, then track."""
        prepared = await self._prepared(session_id)
        while True:
            entry = self._entries.get(session_id)
            if entry is not None and entry.binding is not None:
                raise SessionPersistenceError(
                    f'session "{session_id}" already has a live persistence owner'
                )
            if await self.backend.read_stored_revision(session_id) != prepared.revision:
                prepared = await self._cold_prepare(session_id)
                continue
            if prepared.torn_marker is not None or prepared.closers:
                repaired = await self._locked(session_id, partial(self._repair, prepared))
                prepared = repaired or await self._cold_prepare(session_id)
                continue
            if entry is None:
                entry = self._entries[session_id] = _Entry(prepared.meta)
            entry.meta = prepared.meta
            entry.cursor = len(prepared.events)
            entry.materialized = True
            return entry, prepared

    async def _repair(self, prepared: _Prepared) -> _Prepared | None:
        """Commit the repair. Under the same writer lock the log now holds exactly the prepared
        events (no tail, no closers due), at the revision read here: the next round only checks
        that revision instead of reading and validating the whole log again. None when the log
        is gone."""
        await self.backend.commit_repair(prepared.meta, prepared.torn_marker, prepared.closers)
        revision = await self.backend.read_stored_revision(prepared.meta["id"])
        if revision is None:
            return None
        return _Prepared(prepared.meta, prepared.events, [], revision, None)

    async def _append_durably(self, entry: _Entry, events: list[JsonObject]) -> None:
        """`append_batch` under the writer lock, shielded; then advance the cursor."""
        session_id = entry.meta["id"]
        meta, materialized = entry.meta, entry.materialized

        async def write() -> None:
            await self.backend.append_batch(meta, events, is_materialized=materialized)
            entry.materialized = True
            entry.cursor += len(events)

        await self._locked(session_id, write)
        self._cache.pop(session_id, None)

    # -- public operations (the service delegates here) -----------------------------------------

    async def create(self, meta: JsonObject) -> None:
        """Record the intent to create a session (rule 2); nothing is written until an append."""
        if type(meta) is not dict:
            raise TypeError("session metadata must be losslessly JSON-serializable")
        if not _is_safe_count(meta.get("createdAt")):
            raise TypeError("session metadata createdAt must be a non-negative safe integer")
        try:
            header = snapshot(meta)
        except TypeError:
            raise TypeError("session metadata must be losslessly JSON-serializable") from None
        session_id = header.get("id")
        if type(session_id) is not str or not session_id:
            raise TypeError("session metadata id must be a non-empty string")
        header = {"version": 0, **header}
        async with self._ticket(session_id):
            if session_id in self._entries:
                raise SessionPersistenceError(
                    f'session "{session_id}" already exists in this backend'
                )
            if await self.backend.read_stored_revision(session_id) is not None:
                raise SessionPersistenceError(
                    f'session "{session_id}" already has a persisted log on disk; '
                    "load/resume it instead of creating"
                )
            self._entries[session_id] = _Entry(header)

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
            _refuse_retired(event)
        if not batch:
            return
        async with self._ticket(session_id):
            entry = self._entries.get(session_id)
            if entry is not None and entry.reserved is not None:
                raise SessionPersistenceError(
                    f'cannot append session "{session_id}" while its persisted preparation is '
                    "reserved"
                )
            if entry is None:
                entry, _ = await self._commit(session_id)
            self._check_seqs(session_id, entry.cursor, batch)
            await self._append_durably(entry, batch)

    @staticmethod
    def _check_seqs(session_id: str, cursor: int, batch: Sequence[JsonObject]) -> None:
        for index, event in enumerate(batch):
            seq = event.get("seq")
            if type(seq) is not int or seq != cursor + index:
                got = _js_text(seq) if "seq" in event else "undefined"
                raise SessionPersistenceError(
                    f'append seq mismatch for "{session_id}": expected {cursor + index} at '
                    f"index {index}, got {got}"
                )

    async def prepare(self, session_id: str) -> SessionPreparation:
        """Commit (repairing if needed) and reserve a stored session for publication."""
        await self._wait_retirement(session_id)
        async with self._ticket(session_id):
            entry = self._entries.get(session_id)
            if self._live(session_id) is not None:
                raise SessionPersistenceError(
                    f'cannot prepare session "{session_id}" while it is live'
                )
            if entry is not None and entry.reserved is not None:
                raise SessionPersistenceError(
                    f'cannot prepare session "{session_id}" while its persisted preparation is '
                    "reserved"
                )
            entry, prepared = await self._commit(session_id)
            try:
                session = self._new_session(prepared.meta, list(prepared.events))
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

    async def load(self, session_id: str) -> SessionLog:
        """The balanced log: a live one after a flush, else stored with its repair committed."""
        await self._wait_retirement(session_id)
        async with self._ticket(session_id):
            binding = self._live(session_id)
            if binding is None:
                _, prepared = await self._commit(session_id)
                return SessionLog(prepared.meta, list(prepared.events))
        await self._flush_binding(binding)
        entry = binding.entry
        if entry is None or not entry.materialized:
            raise SessionPersistenceError(f'session "{session_id}" not found')
        events = list(binding.session.events)
        if interrupted_turn_closers(events):
            raise SessionPersistenceError(
                f'cannot load session "{session_id}" while its live turn is open; use the '
                "live Session or wait for the turn to close"
            )
        return SessionLog(dict(entry.meta), events)

    async def inspect(self, session_id: str) -> SessionLog:
        """The balanced log without writing anything (a live session: its unflushed events)."""
        await self._wait_retirement(session_id)
        async with self._ticket(session_id):
            binding = self._live(session_id)
            if binding is not None:
                live = binding.session
                return SessionLog(dict(live.header), list(live.events))
            prepared = await self._prepared(session_id)
            self._remember(session_id, prepared)
            return SessionLog(prepared.meta, list(prepared.events))

    def _live(self, session_id: str) -> _Binding | None:
        entry = self._entries.get(session_id)
        return None if entry is None else entry.binding

    async def read_from(self, session_id: str, from_seq: object) -> list[JsonObject]:
        """The stored events from `from_seq` on: no closers, no torn bytes, `[]` past the end."""
        if not _is_safe_count(from_seq):
            raise TypeError(
                f"readFrom fromSeq must be a non-negative safe integer, got {_js_text(from_seq)}"
            )
        assert isinstance(from_seq, int)
        await self._wait_retirement(session_id)
        async with self._ticket(session_id):
            stored = await self._load_stored(session_id)
        if stored is None:
            raise SessionPersistenceError(f'session "{session_id}" not found')
        return stored.events[from_seq:]

    async def headers(self) -> list[JsonObject]:
        """Materialized headers ordered by `(createdAt, id)`."""
        headers = await self.backend.list()
        return sorted(headers, key=lambda h: (h["createdAt"], h["id"]))

    async def snapshots(self) -> list[Snapshot]:
        return await self.backend.list_snapshots()

    # -- live wiring (§4.2) ---------------------------------------------------------------------

    def on_created(self, session: LiveSession) -> None:
        """`session/created`: bind the session and queue its init in the id's chain."""
        session_id = session.id
        binding = _Binding(session, anyio.Event())
        binding.controller = WriteController(
            label=f'{self.backend.name}: background write for session "{session_id}"',
            write=partial(self._write_live, binding),
            ready=binding.ready,
            timers=self._timers,
        )
        self._bindings[id(session)] = binding
        self._spawn(self._init, binding, self._ticket(session_id))

    def on_event(self, session: LiveSession, event: JsonObject) -> None:
        """`session/event`: buffer the event (O(1))."""
        binding = self._bindings.get(id(session))
        if binding is not None:
            binding.controller.enqueue(event)

    async def on_flush(self, session: LiveSession) -> None:
        """`session/flush`: await the init, then drain the session's buffer."""
        binding = self._bindings.get(id(session)) or self._failed.get(id(session))
        if binding is not None:
            await self._flush_binding(binding)

    async def _flush_binding(self, binding: _Binding) -> None:
        if not binding.ready.is_set():
            await binding.ready.wait()
        if binding.error is not None:
            raise binding.error
        await binding.controller.flush()

    def on_disposed(self, session: LiveSession) -> None:
        """`session/disposed`: retire the binding (flush, then drop state and lock)."""
        self._failed.pop(id(session), None)
        binding = self._bindings.pop(id(session), None)
        if binding is None:
            return
        retirement = _Retirement()
        self._retiring[session.id] = retirement
        self._spawn(self._retire, binding, retirement)

    async def _init(self, binding: _Binding, ticket: Ticket) -> None:
        try:
            async with ticket:
                await self._bind(binding)
        except Exception as error:
            binding.error = error
            binding.controller.cancel_timer()
            binding.controller.pending.clear()
            if self._bindings.pop(id(binding.session), None) is not None:
                self._failed[id(binding.session)] = binding
        finally:
            binding.ready.set()

    async def _bind(self, binding: _Binding) -> None:
        """Claim, adopt or lazily create the live session's storage (§4.2)."""
        session = binding.session
        session_id = session.id
        live_cwd = session.header.get("cwd")
        entry = self._entries.get(session_id)
        if entry is not None and entry.reserved is not None:
            if entry.reserved.session is not session:
                raise SessionPersistenceError(
                    f'session "{session_id}" is already bound to a different live session in '
                    "this backend (id collision)"
                )
            entry.reserved = None
            await self._hold(session_id)
            self._attach(binding, entry)
            return
        if entry is not None and entry.binding is not None:
            other = entry.binding
            if entry.materialized or not other.controller.idle:
                raise SessionPersistenceError(
                    f'session "{session_id}" is already bound to a different live session in '
                    "this backend (id collision)"
                )
            self._detach(other)
        if entry is not None:
            stored_cwd = entry.meta.get("cwd")
            if stored_cwd != live_cwd:
                raise self._cwd_collision(session_id, stored_cwd, live_cwd)
            if entry.cursor:
                stored = await self._load_stored(session_id)
                prefix = [] if stored is None else stored.events
                if not _same_json(session.events[: entry.cursor], prefix):
                    raise SessionPersistenceError(
                        f'session "{session_id}" is already persisted with {entry.cursor} '
                        "event(s) that do not match this live session (id collision)"
                    )
            if entry.materialized:
                await self._hold(session_id)
            self._attach(binding, entry)
            return
        if await self.backend.read_stored_revision(session_id) is None:
            self._attach(binding, _Entry(dict(session.header)))
            return
        await self._hold(session_id)
        try:
            entry = await self._adopt(session)
        except BaseException:
            await self._unhold(session_id)
            raise
        self._attach(binding, entry)

    async def _adopt(self, session: LiveSession) -> _Entry:
        """A stored log the live session continues: truncate a torn tail, no closers."""
        session_id = session.id
        stored = await self._load_stored(session_id)
        if stored is None:
            raise SessionPersistenceError(f'session "{session_id}" not found')
        self._validate(session_id, stored)
        stored_cwd, live_cwd = stored.meta.get("cwd"), session.header.get("cwd")
        if stored_cwd != live_cwd:
            raise self._cwd_collision(session_id, stored_cwd, live_cwd)
        count = len(stored.events)
        if not _same_json(session.events[:count], stored.events):
            raise SessionPersistenceError(
                f'session "{session_id}" already has a persisted log on disk that does not '
                "match this live session (id collision)"
            )
        if stored.torn_marker is not None:
            with anyio.CancelScope(shield=True):
                await self.backend.commit_repair(stored.meta, stored.torn_marker, [])
        return _Entry(stored.meta, cursor=count, materialized=True)

    @staticmethod
    def _cwd_collision(session_id: str, stored: object, live: object) -> SessionPersistenceError:
        def show(cwd: object) -> str:
            return "undefined" if cwd is None else _js_text(cwd)

        return SessionPersistenceError(
            f'session "{session_id}" is already persisted at a different cwd '
            f"(persisted: {show(stored)}, live: {show(live)}) (id collision)"
        )

    def _attach(self, binding: _Binding, entry: _Entry) -> None:
        """Own `entry` and queue the live events it does not hold yet, oldest first."""
        session_id = entry.meta["id"]
        self._entries[session_id] = entry
        entry.binding = binding
        binding.entry = entry
        self._cache.pop(session_id, None)
        events = binding.session.events
        pending = binding.controller.pending
        end = pending[0]["seq"] if pending else len(events)
        binding.controller.prepend(list(events[entry.cursor : end]))

    def _detach(self, binding: _Binding) -> None:
        """Drop an unmaterialized, idle owner (its buffered events go with it)."""
        binding.detached = True
        binding.controller.cancel_timer()
        binding.controller.pending.clear()
        self._bindings.pop(id(binding.session), None)
        if binding.entry is not None:
            binding.entry.binding = None
            binding.entry = None

    async def _write_live(self, binding: _Binding, batch: list[JsonObject]) -> None:
        """A live batch in the id's chain: skip seqs below the durable cursor, then write."""
        async with self._ticket(binding.session.id):
            if binding.error is not None:
                raise binding.error
            entry = binding.entry
            if binding.detached or entry is None:
                return
            cursor = entry.cursor
            if batch and batch[0]["seq"] < cursor:
                batch = [event for event in batch if event["seq"] >= cursor]
            if not batch:
                return
            self._check_seqs(entry.meta["id"], cursor, batch)
            if not entry.materialized:
                await self._hold(entry.meta["id"])
            await self._append_durably(entry, batch)

    async def _retire(self, binding: _Binding, retirement: _Retirement) -> None:
        session_id = binding.session.id
        try:
            await self._flush_binding(binding)
            async with self._ticket(session_id):
                entry = binding.entry
                if entry is not None and entry.binding is binding:
                    entry.binding = None
                    del self._entries[session_id]
                    await self._unhold(session_id)
        except Exception as error:
            logger.warning(
                '%s: session "%s" retirement failed: %s', self.backend.name, session_id, error
            )
            self._unretired.append(binding)
        finally:
            if self._retiring.get(session_id) is retirement:
                del self._retiring[session_id]
            retirement.done.set()

    # -- teardown -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Drain every live buffer, release locks, close the backend; failures are grouped."""
        errors: list[Exception] = []
        bindings = [*self._bindings.values(), *self._unretired]
        for binding in bindings:
            binding.controller.cancel_timer()
        for binding in bindings:
            if binding.error is not None or binding.detached:
                continue
            try:
                await self._flush_binding(binding)
            except Exception as error:
                errors.append(error)
        for retirement in list(self._retiring.values()):
            await retirement.done.wait()
        for session_id in list(self._held):
            try:
                await self._unhold(session_id)
            except Exception as error:
                errors.append(error)
        self._bindings.clear()
        self._failed.clear()
        self._unretired.clear()
        self._entries.clear()
        self._cache.clear()
        try:
            await self.backend.aclose()
        except Exception as error:
            errors.append(error)
        if errors:
            raise ExceptionGroup(f"{self.backend.name} dispose failed", errors)
