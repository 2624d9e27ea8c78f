"""Live sessions wired to the backend (docs/persistence.md, "live sessions").

`session/created` binds a Session: its init claims a recorded intent, adopts a stored log the
session continues, or waits to create the log lazily; `session/event` buffers (O(1)); the write
controller drains the buffer in batches through the id's queue; `session/disposed` retires the
binding (flush, then drop its state and lock).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from functools import partial

import anyio

from plugins.session.jsonutil import dumps

from .backend import EncodesAhead, JsonObject, PersistenceBackend
from .cold import ColdStore, check_seqs
from .errors import SessionPersistenceError
from .fifo import Ticket
from .formats import js_text
from .inline import Inlining, WritesInline
from .locks import WriterLocks
from .session_api import LiveSession
from .state import Binding, Entry, Retirement, SessionTable
from .timers import Spawn, Timers
from .writer import DONE, WriteController

logger = logging.getLogger("plugins.session_persistence")


def _same_json(left: Sequence[JsonObject], right: Sequence[JsonObject]) -> bool:
    return len(left) == len(right) and all(
        a is b or dumps(a) == dumps(b) for a, b in zip(left, right, strict=True)
    )


def _from_seq(batch: list[JsonObject], seq: int) -> list[JsonObject]:
    """The events of `batch` from `seq` on (apart from `_write_live`: a comprehension there
    would keep a closure cell in its frame while the write waits)."""
    return [event for event in batch if event["seq"] >= seq]


def _cwd_collision(session_id: str, stored: object, live: object) -> SessionPersistenceError:
    def show(cwd: object) -> str:
        return "undefined" if cwd is None else js_text(cwd)

    return SessionPersistenceError(
        f'session "{session_id}" is already persisted at a different cwd '
        f"(persisted: {show(stored)}, live: {show(live)}) (id collision)"
    )


class LiveSessions:
    """The live bindings of one backend and their write paths."""

    def __init__(
        self,
        backend: PersistenceBackend,
        table: SessionTable,
        locks: WriterLocks,
        cold: ColdStore,
        timers: Timers,
        spawn: Spawn,
    ) -> None:
        self.backend = backend
        self.table = table
        self.locks = locks
        self.cold = cold
        self._timers = timers
        self._spawn = spawn
        self._encodes = backend if isinstance(backend, EncodesAhead) else None
        #: Whether live writes may run inline at all (`inline.InlineGate`, docs/performance.md).
        self._inlines = isinstance(backend, Inlining) and backend.inline_gate.enabled
        #: Live bindings by `id(session)`: the `session/event` hot path is one dict lookup.
        self.bindings: dict[int, Binding] = {}
        #: Bindings whose init failed, by `id(session)`: their flushes re-raise the failure.
        self.failed: dict[int, Binding] = {}
        #: Bindings whose retirement failed: teardown drains them again.
        self.unretired: list[Binding] = []

    # -- the session store's events -------------------------------------------------------------

    def on_created(self, session: LiveSession) -> None:
        """`session/created`: bind the session and queue its init in the id's chain."""
        session_id = session.id
        binding = Binding(session, anyio.Event())
        if self._encodes is not None:
            binding.encoder = self._encodes.live_encoder()
        encoder = binding.encoder
        inline = encoder if self._inlines and isinstance(encoder, WritesInline) else None
        binding.controller = WriteController(
            label=f'{self.backend.name}: background write for session "{session_id}"',
            write=partial(self._write_live, binding),
            ready=binding.ready,
            timers=self._timers,
            admit=None if binding.encoder is None else binding.encoder.admit,
            write_now=None if inline is None else partial(self._write_inline, binding, inline),
        )
        self.bindings[id(session)] = binding
        self._spawn(self._init, binding, self.table.ticket(session_id))

    def on_event(self, session: LiveSession, event: JsonObject) -> None:
        """`session/event`: buffer the event (O(1))."""
        binding = self.bindings.get(id(session))
        if binding is not None:
            binding.controller.enqueue(event)

    def on_flush(self, session: LiveSession) -> Awaitable[None] | None:
        """`session/flush`: await the init, then drain the session's buffer (what to await;
        None for a session not bound here, or once its flush is already over: the store
        then awaits nothing)."""
        binding = self.bindings.get(id(session)) or self.failed.get(id(session))
        if binding is None:
            return None
        pending = self.flush(binding)
        return None if pending is DONE else pending

    def on_disposed(self, session: LiveSession) -> None:
        """`session/disposed`: retire the binding (flush, then drop state and lock)."""
        self.failed.pop(id(session), None)
        binding = self.bindings.pop(id(session), None)
        if binding is None:
            return
        retirement = Retirement()
        self.table.retiring[session.id] = retirement
        self._spawn(self._retire, binding, retirement)

    def flush(self, binding: Binding) -> Awaitable[None]:
        """Wait for the binding's init, re-raise its failure, drain its buffer. Plain functions
        down to the write controller's drain: a waiting flush holds no coroutine of theirs
        (docs/performance.md)."""
        if not binding.ready.is_set():
            return self._flush_when_ready(binding)
        if binding.error is not None:
            raise binding.error
        return binding.controller.flush()

    async def _flush_when_ready(self, binding: Binding) -> None:
        await binding.ready.wait()
        await self.flush(binding)

    # -- binding --------------------------------------------------------------------------------

    async def _init(self, binding: Binding, ticket: Ticket) -> None:
        try:
            async with ticket:
                await self._bind(binding)
        except Exception as error:
            binding.error = error
            binding.controller.cancel_timer()
            binding.controller.pending.clear()
            if self.bindings.pop(id(binding.session), None) is not None:
                self.failed[id(binding.session)] = binding
        finally:
            binding.ready.set()

    async def _bind(self, binding: Binding) -> None:
        """Claim, adopt or lazily create the live session's storage."""
        session = binding.session
        session_id = session.id
        live_cwd = session.header.get("cwd")
        entry = self.table.entries.get(session_id)
        if entry is not None and entry.reserved is not None:
            if entry.reserved.session is not session:
                raise SessionPersistenceError(
                    f'session "{session_id}" is already bound to a different live session in '
                    "this backend (id collision)"
                )
            entry.reserved = None
            await self.locks.hold(session_id)
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
                raise _cwd_collision(session_id, stored_cwd, live_cwd)
            if entry.cursor:
                stored = await self.cold.read_stored(session_id)
                prefix = [] if stored is None else stored.events
                if not _same_json(session.events[: entry.cursor], prefix):
                    raise SessionPersistenceError(
                        f'session "{session_id}" is already persisted with {entry.cursor} '
                        "event(s) that do not match this live session (id collision)"
                    )
            if entry.materialized:
                await self.locks.hold(session_id)
            self._attach(binding, entry)
            return
        if await self.backend.read_stored_revision(session_id) is None:
            self._attach(binding, Entry(dict(session.header)))
            return
        await self.locks.hold(session_id)
        try:
            entry = await self._adopt(session)
        except BaseException:
            await self.locks.unhold(session_id)
            raise
        self._attach(binding, entry)

    async def _adopt(self, session: LiveSession) -> Entry:
        """A stored log the live session continues: truncate a torn tail, no closers."""
        session_id = session.id
        stored, _ = await self.cold.read_checked(session_id)
        stored_cwd, live_cwd = stored.meta.get("cwd"), session.header.get("cwd")
        if stored_cwd != live_cwd:
            raise _cwd_collision(session_id, stored_cwd, live_cwd)
        count = len(stored.events)
        if not _same_json(session.events[:count], stored.events):
            raise SessionPersistenceError(
                f'session "{session_id}" already has a persisted log on disk that does not '
                "match this live session (id collision)"
            )
        if stored.torn_marker is not None:
            with anyio.CancelScope(shield=True):
                kept = await self.backend.commit_repair(stored.meta, stored.torn_marker, [])
            self.table.kept(session_id, kept)
        return Entry(stored.meta, cursor=count, materialized=True)

    def _attach(self, binding: Binding, entry: Entry) -> None:
        """Own `entry` and queue the live events it does not hold yet, oldest first."""
        session_id = entry.meta["id"]
        self.table.entries[session_id] = entry
        entry.binding = binding
        binding.entry = entry
        self.cold.forget(session_id)
        events = binding.session.events
        pending = binding.controller.pending
        end = pending[0]["seq"] if pending else len(events)
        binding.controller.prepend(list(events[entry.cursor : end]))

    def _detach(self, binding: Binding) -> None:
        """Drop an unmaterialized, idle owner (its buffered events go with it)."""
        binding.detached = True
        binding.controller.cancel_timer()
        binding.controller.pending.clear()
        self.bindings.pop(id(binding.session), None)
        if binding.entry is not None:
            binding.entry.binding = None
            binding.entry = None

    # -- writing and retiring -------------------------------------------------------------------

    async def _write_live(self, binding: Binding, batch: list[JsonObject]) -> None:
        """A live batch in the id's chain: skip seqs below the durable cursor, then write."""
        async with self.table.ticket(binding.session.id):
            if binding.error is not None:
                raise binding.error
            entry = binding.entry
            if binding.detached or entry is None:
                return
            cursor = entry.cursor
            if batch and batch[0]["seq"] < cursor:
                batch = _from_seq(batch, cursor)
            if not batch:
                return
            check_seqs(entry.meta["id"], cursor, batch)
            if not entry.materialized:
                await self.locks.hold(entry.meta["id"])
            await self.cold.append_durably(entry, batch, binding.encoder)

    def _write_inline(
        self, binding: Binding, encoder: WritesInline, batch: list[JsonObject]
    ) -> bool:
        """`_write_live` without suspending, when nothing stands in its way: the id's queue is
        empty (nothing can join it before this returns), the log exists under the held writer
        lock, the batch starts at the cursor and the backend's gate runs the append inline now.
        False: nothing was done (the awaited path takes the batch)."""
        session_id = binding.session.id
        entry = binding.entry
        if (
            binding.error is not None
            or binding.detached
            or entry is None
            or not entry.materialized
            or not batch
            or batch[0]["seq"] != entry.cursor
            or not self.table.idle(session_id)
            or not self.locks.holds(session_id)
        ):
            return False
        check_seqs(session_id, entry.cursor, batch)
        if not encoder.append_inline(entry.meta, batch):
            return False
        entry.cursor += len(batch)
        self.cold.forget(session_id)
        return True

    async def _retire(self, binding: Binding, retirement: Retirement) -> None:
        session_id = binding.session.id
        try:
            await self.flush(binding)
            async with self.table.ticket(session_id):
                entry = binding.entry
                if entry is not None and entry.binding is binding:
                    entry.binding = None
                    del self.table.entries[session_id]
                    await self.locks.unhold(session_id)
        except Exception as error:
            logger.warning(
                '%s: session "%s" retirement failed: %s', self.backend.name, session_id, error
            )
            self.unretired.append(binding)
        finally:
            if self.table.retiring.get(session_id) is retirement:
                del self.table.retiring[session_id]
            retirement.done.set()

    async def drain(self) -> list[Exception]:
        """Teardown: flush every live buffer once and wait for retirements; the failures."""
        errors: list[Exception] = []
        bindings = [*self.bindings.values(), *self.unretired]
        for binding in bindings:
            binding.controller.cancel_timer()
        for binding in bindings:
            if binding.error is not None or binding.detached:
                continue
            try:
                await self.flush(binding)
            except Exception as error:
                errors.append(error)
        for retirement in list(self.table.retiring.values()):
            await retirement.done.wait()
        return errors

    def clear(self) -> None:
        self.bindings.clear()
        self.failed.clear()
        self.unretired.clear()
