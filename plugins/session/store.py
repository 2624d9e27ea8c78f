"""`SessionStore`, the `sessions` service: live sessions, their lifecycle events, fork, flush."""

from __future__ import annotations

import builtins
import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from framework import Effect, Service

from .events import HEADER_KEYS, Event, make_header
from .hooks import CREATED, DISPOSED, EVENT, FLUSH
from .jsonutil import snapshot
from .repair import interrupted_turn_closers
from .session import Clock, Session, _background, logger, now_ms

if TYPE_CHECKING:
    from framework import Context

__all__ = ["SessionForkError", "SessionStore", "fork_seed"]

Listener = Callable[..., Any]

_META_KEYS = frozenset(HEADER_KEYS[2:])


class SessionForkError(RuntimeError):
    """Raised by `fork`; `.code` is `SESSION_ALREADY_EXISTS`, `SESSION_NOT_FOUND`,
    `SESSION_NOT_LIVE`, `INVALID_BOUNDARY` or `OPEN_TURN`."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def fork_seed(
    source_id: str,
    header: Mapping[str, Any],
    events: Sequence[Event],
    boundary: int | None = None,
) -> tuple[Sequence[Event], dict[str, Any]]:
    """The seed and meta of a fork of `source_id` (its `header` and `events`) at `boundary`
    (inclusive, default the last seq): raises `SessionForkError` (`INVALID_BOUNDARY`,
    `OPEN_TURN`) for a boundary that is not a seq or ends inside an open turn."""
    last = len(events) - 1
    if boundary is None:
        boundary = last
    if type(boundary) is not int or not 0 <= boundary <= last:
        raise SessionForkError(
            f'fork boundary {boundary!r} is not a seq of session "{source_id}" (0..{last})',
            "INVALID_BOUNDARY",
        )
    seed = events[: boundary + 1]
    closers = interrupted_turn_closers(seed)
    if closers:
        turn = closers[-1]["data"]["turn"]
        raise SessionForkError(
            f'fork boundary {boundary} in session "{source_id}" ends inside open turn {turn}',
            "OPEN_TURN",
        )
    meta: dict[str, Any] = {}
    if "cwd" in header:
        meta["cwd"] = header["cwd"]
    meta["parentSession"] = source_id
    meta["seedLength"] = boundary + 1
    return seed, meta


class _Entry:
    """A live session and the effect (owned by the fiber that entered it) that detaches it."""

    __slots__ = ("effect", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.effect: Effect | None = None


class SessionStore(Service):
    """The live sessions of one context tree (service `sessions`).

    Bus events, dispatched by the store from listener snapshots: `session/created (session)`
    (synchronous; a raise vetoes the creation), `session/event (session, event)` (from
    `Session.append`), `session/flush (session)` (awaited by `flush`), `session/disposed
    (session)` (once, contained).
    """

    provide = "sessions"

    def __init__(self, ctx: Context, config: Any = None, *, clock: Clock = now_ms) -> None:
        super().__init__(ctx, config)
        self.clock = clock
        self._live: dict[str, _Entry] = {}
        self._counter = itertools.count(1)
        #: This store's identity when no `sessionPersistence` keeps one (random, in memory).
        self._memory_identity = uuid.uuid4().hex
        #: `ctx.listeners(EVENT)` and `ctx.listeners(FLUSH)` in one call each: the publisher
        #: runs on every append, `flush` at every checkpoint.
        self._event_listeners = ctx.listener_snapshots(EVENT)
        self._flush_listeners = ctx.listener_snapshots(FLUSH)

    # -- dispatch ----------------------------------------------------------------------------

    def _publish(self, session: Session, event: Event) -> None:
        """The publisher of a published session: `session/event` to every listener, failures
        logged, awaitables awaited in the background."""
        for listener in self._event_listeners():
            try:
                result = listener(session, event)
            except Exception as error:
                logger.error('session "%s": session/event listener threw: %s', session.id, error)
                continue
            if result is not None and hasattr(result, "__await__"):
                _background(self.ctx, result, session.id, "session/event listener rejected")

    def _notify_disposed(self, session: Session) -> None:
        for listener in self.ctx.listeners(DISPOSED):
            try:
                result = listener(session)
            except Exception as error:
                logger.error('session "%s": session/disposed listener threw: %s', session.id, error)
                continue
            if result is not None and hasattr(result, "__await__"):
                _background(self.ctx, result, session.id, "session/disposed listener rejected")

    # -- lifecycle ---------------------------------------------------------------------------

    def create(
        self,
        id: str | None = None,
        *,
        seed: Sequence[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """Prepare, enter and announce a new session, owned by the calling fiber."""
        session = self.prepare(id, seed=seed, meta=meta)
        self.enter(session)
        self.announce(session)
        return session

    def prepare(
        self,
        id: str | None = None,
        *,
        seed: Sequence[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new, unpublished session: `id` (default: a free `session-<n>`), header from `meta`
        (`createdAt` defaults to now), validated `seed`. Nothing is registered or emitted."""
        try:
            fields: dict[str, Any] = snapshot(dict(meta) if meta is not None else {})
        except TypeError as error:
            raise TypeError("session metadata must be losslessly JSON-serializable") from error
        unknown = fields.keys() - _META_KEYS
        if unknown:
            names = ", ".join(f'"{k}"' for k in sorted(unknown))
            raise ValueError(f"session metadata has unknown key(s) {names}")
        if id is None:
            id = self._free_id()
        elif type(id) is not str or not id:
            raise ValueError(f"session id must be a non-empty string, got {id!r}")
        if id in self._live:
            raise RuntimeError(f'session "{id}" already exists')
        created_at = fields.get("createdAt", self.clock())
        return Session(make_header(id, created_at, fields), seed, clock=self.clock)

    def _free_id(self) -> str:
        while True:
            candidate = f"session-{next(self._counter)}"
            if candidate not in self._live:
                return candidate

    def enter(self, session: Session) -> None:
        """Register `session` as live, as an effect of the calling fiber: disposing that fiber
        detaches it (`session/disposed`)."""
        if session.id in self._live:
            raise RuntimeError(f'session "{session.id}" already exists')
        entry = _Entry(session)

        def setup() -> Callable[[], None]:
            self._live[session.id] = entry
            session._clock = self.clock
            return lambda: self._detach(entry)

        entry.effect = self.caller.effect(setup)

    def announce(self, session: Session) -> None:
        """Publish an entered session: appends reach `session/event` listeners from now on, and
        `session/created` runs synchronously. A raising listener vetoes: the session is detached
        (`session/disposed` is still emitted) and the error propagates."""
        entry = self._live.get(session.id)
        if entry is None or entry.session is not session:
            raise RuntimeError(f'session "{session.id}" is not live in this store')
        session.publish_to(self._publish)
        try:
            for listener in self.ctx.listeners(CREATED):
                result = listener(session)
                if result is not None and hasattr(result, "__await__"):
                    _background(self.ctx, result, session.id, "session/created listener rejected")
        except BaseException:
            self.dispose(session)
            raise

    def dispose(self, session: Session) -> None:
        """Detach a live session now (idempotent); emits `session/disposed` once."""
        entry = self._live.get(session.id)
        if entry is None or entry.session is not session:
            return
        if entry.effect is not None:
            entry.effect()
        else:
            self._detach(entry)

    def _detach(self, entry: _Entry) -> None:
        session = entry.session
        if self._live.get(session.id) is not entry:
            return
        del self._live[session.id]
        session.publish_to(None)
        self._notify_disposed(session)

    def close(self) -> None:
        """Detach every live session, newest first (the store is going away)."""
        for entry in reversed(builtins.list(self._live.values())):
            self.dispose(entry.session)

    # -- queries -----------------------------------------------------------------------------

    async def identity(self) -> str:
        """The identity of the store the sessions live in: the persistence backend's (stable
        across processes), else a random id of this store (docs/tools-and-cancellation.md)."""
        persistence = self.ctx.get("sessionPersistence")
        if persistence is None:
            return self._memory_identity
        identity: str = await persistence.identity()
        return identity

    def get(self, id: str) -> Session | None:
        """The live session with that id, or None."""
        entry = self._live.get(id)
        return None if entry is None else entry.session

    def list(self) -> builtins.list[Session]:
        """Live sessions in creation (entry) order."""
        return [entry.session for entry in self._live.values()]

    def _resolve(self, session: Session | str) -> Session | None:
        entry = self._live.get(session if isinstance(session, str) else session.id)
        if entry is None or (not isinstance(session, str) and entry.session is not session):
            return None
        return entry.session

    # -- fork and flush ----------------------------------------------------------------------

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        *,
        id: str | None = None,
    ) -> Session:
        """A new live session seeded with `source`'s events up to `boundary` (inclusive,
        default the last seq); its meta is `{cwd?, parentSession, seedLength}`."""
        source_id = source if isinstance(source, str) else source.id
        parent = self._resolve(source)
        if parent is None and isinstance(source, str):
            raise SessionForkError(f'session "{source_id}" not found', "SESSION_NOT_FOUND")
        if parent is None:
            raise SessionForkError(
                f'session "{source_id}" is not live in this store', "SESSION_NOT_LIVE"
            )
        seed, meta = fork_seed(source_id, parent.header, parent.events, boundary)
        if id is not None and id in self._live:
            raise SessionForkError(f'session "{id}" already exists', "SESSION_ALREADY_EXISTS")
        return self.create(id, seed=seed, meta=meta)

    async def flush(self, session: Session | str) -> bool:
        """Run every `session/flush` listener concurrently and wait for all of them; then
        re-raise the first failure in registration order (as itself). True iff a listener ran."""
        live = self._resolve(session)
        if live is None:
            session_id = session if isinstance(session, str) else session.id
            raise RuntimeError(f'session "{session_id}" is not live in this store')
        listeners = self._flush_listeners()
        if not listeners:
            return False
        if len(listeners) == 1:
            # One listener (one backend, the common case): awaiting it directly is the same
            # contract without a task group per flush.
            result = listeners[0](live)
            if result is not None and hasattr(result, "__await__"):
                await result
            return True
        await _run_all(listeners, live)
        return True


async def _run_all(listeners: Sequence[Listener], session: Session) -> None:
    """Every `session/flush` listener concurrently; then the first failure in registration
    order, as itself. Apart from `SessionStore.flush` so that its common one-listener path
    keeps no closure cells while it waits (docs/performance.md)."""
    failures: builtins.list[Exception | None] = [None] * len(listeners)

    async def run(index: int, listener: Listener) -> None:
        try:
            result = listener(session)
            if result is not None and hasattr(result, "__await__"):
                await result
        except Exception as error:
            failures[index] = error

    async with anyio.create_task_group() as group:
        for index, listener in enumerate(listeners):
            group.start_soon(run, index, listener)
    for failure in failures:
        if failure is not None:
            raise failure
