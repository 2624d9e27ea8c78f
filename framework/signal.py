"""Abort signals (docs/concepts.md): AbortController/AbortSignal, deadlines and abort scopes.

Design of deadlines. `deadline(parent, ms, code)` is a plain `with` block, so it cannot open a
task group of its own. Its signal therefore carries the deadline as data (on anyio's clock) and
fires in two complementary ways:

* lazily, at the first observation after the deadline: `aborted`, `reason`,
  `throw_if_aborted()`, and the waiting primitives `wait()` and `abort_scope()`, which put the
  deadline on their own cancel scope; signals derived with `AbortSignal.any` inherit the earliest
  deadline of their sources;
* eagerly, for plain listeners, through a timer task started in the task group of the running
  root `framework.Context` (published in a context variable while the root is entered). Leaving
  the `with` block cancels that task and clears the deadline.

Outside a root Context only the lazy path exists (listeners then fire at the next observation).
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio
from anyio.abc import TaskGroup

from framework.errors import FrameworkError

logger = logging.getLogger("framework.signal")

Listener = Callable[[object], object]

#: Task group for eager deadline timers, set by the root `Context` while it is entered.
#: Framework-internal: plugins run background work with `ctx.spawn` / `ctx.start`.
_timer_group: ContextVar[TaskGroup | None] = ContextVar("framework_timer_group", default=None)


class AbortError(FrameworkError):
    """An operation was aborted through an AbortSignal; `.reason` holds the abort reason."""

    def __init__(self, message: str = "This operation was aborted", reason: object = None) -> None:
        super().__init__(message)
        self.reason: object = self if reason is None else reason


class TimeoutReason(AbortError):
    """The abort reason of a `deadline` that fired: `.code` and `.ms`."""

    def __init__(self, code: str, ms: float) -> None:
        super().__init__(f"deadline {code} of {ms}ms exceeded")
        self.code = code
        self.ms = ms


class AbortSignal:
    """Read side of an abort: state, reason, listeners and waiting."""

    __slots__ = (
        "__weakref__",
        "_aborted",
        "_deadline",
        "_deadline_src",
        "_listeners",
        "_next_id",
        "_reason",
        "_timeout",
    )

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: dict[int, Listener] = {}
        self._next_id = 0
        self._deadline = math.inf
        self._deadline_src: AbortSignal | None = None
        self._timeout: TimeoutReason | None = None  # set on deadline signals only

    @property
    def aborted(self) -> bool:
        """Whether the signal has aborted (observing it fires an expired deadline)."""
        if not self._aborted and self._deadline_src is not None:
            self._check_deadline()
        return self._aborted

    @property
    def reason(self) -> object:
        """The abort reason (None while not aborted)."""
        return self._reason if self.aborted else None

    def throw_if_aborted(self) -> None:
        """Raise if aborted: the reason itself when it is an AbortError, else AbortError(reason)."""
        if self.aborted:
            raise as_abort_error(self._reason)

    raise_if_aborted = throw_if_aborted

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(reason)` synchronously on abort (at once if already aborted).

        Returns a remover. Listener exceptions are logged and do not stop other listeners.
        """
        if self.aborted:
            _call(listener, self._reason)
            return _noop
        key = self._next_id
        self._next_id += 1
        self._listeners[key] = listener
        return lambda: self._listeners.pop(key, None) and None

    async def wait(self) -> None:
        """Return once the signal has aborted."""
        if self.aborted:
            return
        event = anyio.Event()
        remove = self.add_listener(lambda _reason: event.set())
        try:
            while not self.aborted:
                with anyio.CancelScope(deadline=self._deadline):
                    await event.wait()
        finally:
            remove()

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """A signal that aborts with the reason of the first of `signals` to abort."""
        sources = list(signals)
        combined = AbortSignal()
        for source in sources:
            if source.aborted:
                combined._abort(source._reason)
                return combined
        ref = weakref.ref(combined)

        def forward(reason: object) -> None:
            target = ref()
            if target is not None:
                target._abort(reason)

        removers = [source.add_listener(forward) for source in sources]
        weakref.finalize(combined, _run_all, removers)
        for source in sources:
            if source._deadline < combined._deadline:
                combined._deadline = source._deadline
                combined._deadline_src = source
        return combined

    def _check_deadline(self) -> None:
        src = self._deadline_src
        if src is None or anyio.current_time() < self._deadline:
            return
        if src is self:
            self._abort(self._timeout)
            return
        src._check_deadline()
        if not self._aborted:  # the source's deadline was withdrawn (its block exited)
            self._deadline = math.inf
            self._deadline_src = None

    def _abort(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        self._deadline = math.inf
        self._deadline_src = None
        listeners = list(self._listeners.values())
        self._listeners.clear()
        for listener in listeners:
            _call(listener, reason)


class AbortController:
    """Write side of an abort: `abort(reason)` aborts `signal`."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Abort the signal; idempotent, the first reason wins (None → `AbortError()`)."""
        if not self.signal._aborted:
            self.signal._abort(AbortError() if reason is None else reason)


def as_abort_error(reason: object) -> AbortError:
    """The AbortError to raise for `reason`: itself if it is one, else wrapping it."""
    if isinstance(reason, AbortError):
        return reason
    return AbortError(reason=reason)


class Deadline:
    """The handle of a `deadline` block: `.signal` aborts on the parent or on expiry."""

    __slots__ = ("signal",)

    def __init__(self, signal: AbortSignal) -> None:
        self.signal = signal


@contextmanager
def deadline(parent: AbortSignal | None, ms: float, code: str) -> Iterator[Deadline]:
    """A signal that aborts with `parent`'s reason, or with `TimeoutReason(code, ms)` after `ms`."""
    signal = AbortSignal()
    signal._timeout = TimeoutReason(code, ms)
    remove_parent = _noop
    if parent is not None:
        remove_parent = parent.add_listener(signal._abort)
    if not signal._aborted:
        signal._deadline = anyio.current_time() + max(ms, 0) / 1000
        signal._deadline_src = signal
        if parent is not None and parent._deadline < signal._deadline:
            signal._deadline = parent._deadline
            signal._deadline_src = parent
    timer = anyio.CancelScope(deadline=signal._deadline)
    group = _timer_group.get()
    if group is not None and not signal._aborted:
        try:
            group.start_soon(_fire_at, signal, timer)
        except RuntimeError:  # the root is closing: only the lazy path remains
            pass
    try:
        yield Deadline(signal)
    finally:
        remove_parent()
        timer.cancel()
        signal._deadline = math.inf
        signal._deadline_src = None


def timeout_of(signal: AbortSignal, code: str) -> TimeoutReason | None:
    """The TimeoutReason if `signal` is a deadline signal aborted by its OWN expiry with `code`."""
    own = signal._timeout
    if own is not None and signal.aborted and signal._reason is own and own.code == code:
        return own
    return None


@contextmanager
def abort_scope(signal: AbortSignal) -> Iterator[anyio.CancelScope]:
    """Run a block in a cancel scope cancelled when `signal` aborts; then raise AbortError.

    One-way bridge: cancellation from outside (a task group) propagates unchanged and never
    aborts the signal.
    """
    signal.aborted  # noqa: B018 - observing fires or withdraws an expired deadline first
    scope = anyio.CancelScope(deadline=signal._deadline)
    remove = signal.add_listener(lambda _reason: scope.cancel())
    try:
        with scope:
            yield scope
    finally:
        remove()
    if signal.aborted:
        raise as_abort_error(signal._reason)


async def _fire_at(signal: AbortSignal, timer: anyio.CancelScope) -> None:
    with timer:
        await anyio.sleep_forever()
    signal._check_deadline()  # no-op once the block has exited (the deadline is cleared)


def _call(listener: Listener, reason: object) -> None:
    try:
        listener(reason)
    except Exception:
        logger.exception("abort listener failed")


def _run_all(removers: list[Callable[[], None]]) -> None:
    for remove in removers:
        remove()


def _noop() -> None:
    return None
