"""A long-lived I/O thread per backend: blocking storage calls off the event loop, cheaply.

`anyio.to_thread.run_sync` costs a capacity-limiter round trip and extra loop passes on every
call; on a small VM that hand-off costs about as much as the `fsync` it carries. `IoThread` keeps
one daemon thread that takes calls from a queue and wakes the waiting task directly on its own
loop (asyncio or trio), in submission order. The wait is shielded: a cancelled caller still waits
for its call to finish, so a write is never abandoned half-way (docs/performance.md).

With `overflow=True` a call that arrives while the thread is busy runs in an anyio worker thread
instead, so independent calls (the files of many sessions) still run in parallel.

With a `group` runner, calls submitted with `group=True` that are queued one after another are
taken together (two or more) and handed to the runner, which runs each inside one unit of its own
(SQLite: one transaction, one commit, so one fsync for many sessions' writes). A call's own failure
is its alone; a failure of the unit (the runner raising) fails every call of the group that had not
already failed. Callers are woken only once the whole unit has finished.

With a `gate` (`inline.InlineGate`), a call submitted with `inline=True` runs on the loop thread
itself when the gate allows it and nothing is queued or running here (no overflow call either);
otherwise it is queued as usual. Either way its duration is reported to the gate. A synchronous
caller runs its call with `try_inline`, which does the same or nothing (a live flush that needs
no `await` at all: docs/performance.md).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread

from .inline import InlineGate

T = TypeVar("T")

#: Seconds an idle thread waits for work before it exits (the next call starts a new one).
IDLE_SECONDS = 30.0
#: At most this many calls are grouped into one unit.
GROUP_MAX = 512


#: What a caller waits on: an asyncio future, or on trio an `anyio.Event`.
Done = asyncio.Future[None] | anyio.Event
#: A loop's thread-safe "run `fn(*args)` soon" (`call_soon_threadsafe`, `run_sync_soon`).
Wake = Callable[..., object]


def _signal() -> tuple[Done, Wake]:
    """What a caller on the running loop waits on, and that loop's thread-safe wake. On
    asyncio a bare future: an `anyio.Event` wraps an `asyncio.Event` around one, and a waiting
    call's objects live, and are traversed by the garbage collector, for as long as it waits
    (docs/performance.md)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop: anyio runs on trio
        import trio

        return anyio.Event(), trio.lowlevel.current_trio_token().run_sync_soon
    return loop.create_future(), loop.call_soon_threadsafe


def _release(done: Done) -> None:
    if isinstance(done, asyncio.Future):
        if not done.done():  # a task cancelled outside anyio cancelled its future
            done.set_result(None)
    else:
        done.set()


def _release_all(dones: Sequence[Done]) -> None:
    for done in dones:
        _release(done)


class Call(Generic[T]):
    """One submitted call; a group runner calls `execute()` on each call of its group."""

    __slots__ = ("clock", "done", "elapsed", "error", "fn", "group", "result", "wake")

    def __init__(
        self, fn: Callable[[], T], group: bool, clock: Callable[[], float] | None = None
    ) -> None:
        self.fn = fn
        self.group = group
        self.clock = clock
        self.done, self.wake = _signal()
        self.result: T | None = None
        self.error: BaseException | None = None
        #: How long `fn` ran, when a `clock` was given.
        self.elapsed = 0.0

    def execute(self) -> None:
        """Run the call, recording its result or its exception (and its duration)."""
        start = self.clock() if self.clock is not None else 0.0
        try:
            self.result = self.fn()
        except BaseException as error:
            self.error = error
        if self.clock is not None:
            self.elapsed = self.clock() - start


def _finish(calls: Sequence[Call[Any]]) -> None:
    """Wake the callers of `calls`, in order, with one hand-off per loop for a whole group: each
    hand-off is a loop callback and a wake-up write, a system call that releases the GIL
    (docs/performance.md)."""
    if len(calls) == 1:
        call = calls[0]
        call.wake(_release, call.done)
        return
    dones: dict[Wake, list[Done]] = {}
    for call in calls:
        dones.setdefault(call.wake, []).append(call.done)
    for wake, waiting in dones.items():
        wake(_release_all, waiting)


#: Runs a group of calls as one unit (see the module docstring).
GroupRunner = Callable[[Sequence[Call[Any]]], None]


class IoThread:
    """Runs blocking calls, one at a time and in order, on one long-lived thread."""

    def __init__(
        self,
        name: str,
        *,
        overflow: bool = False,
        group: GroupRunner | None = None,
        gate: InlineGate | None = None,
    ) -> None:
        self._name = name
        self._overflow = overflow
        self._group = group
        self._gate = gate if gate is not None and gate.enabled else None
        #: Calls for the thread; None only wakes it (`close`).
        self._jobs: queue.SimpleQueue[Call[Any] | None] = queue.SimpleQueue()
        #: Held while a call is queued and the thread started, and while the thread decides to
        #: exit (never while the thread is woken for a call: it does not take this lock then).
        self._life = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Calls submitted to the thread (counted on the loop thread) and finished (counted on
        #: the I/O thread): each count has one writer, so neither needs a lock.
        self._submitted = 0
        self._finished = 0
        #: Overflow calls running in anyio worker threads.
        self._spilled = 0
        self._closing = False

    @property
    def _queued(self) -> int:
        """Calls submitted to the thread and not yet finished."""
        return self._submitted - self._finished

    async def run(
        self, fn: Callable[..., T], *args: Any, group: bool = False, inline: bool = False
    ) -> T:
        """`fn(*args)` off the loop; its result or its exception. `group=True` lets it share a
        unit with the group-able calls queued next to it; `inline=True` lets it run on the loop
        thread when the gate allows (see the module docstring)."""
        if inline and self._may_inline():
            # Right here, without yielding (a live flush's drain may yield once before).
            return self._call_inline(fn, *args)
        gate = self._gate if inline else None
        if self._overflow and self._queued:
            return await self._spill(partial(fn, *args), gate)
        clock = gate.clock if gate is not None else None
        call: Call[T] = Call(partial(fn, *args), group and self._group is not None, clock)
        self._submitted += 1
        with self._life:
            self._jobs.put(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
        done = call.done
        with anyio.CancelScope(shield=True):
            await (done if isinstance(done, asyncio.Future) else done.wait())
        if gate is not None:
            gate.record(call.elapsed)
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def try_inline(self, fn: Callable[..., object], *args: Any) -> bool:
        """`fn(*args)` on the calling (loop) thread when an eligible call may run there now
        (True, once it has returned; its exception propagates); else nothing (False)."""
        if not self._may_inline():
            return False
        self._call_inline(fn, *args)
        return True

    def _may_inline(self) -> bool:
        """Whether an eligible call may run on the loop thread now: the gate allows it and
        nothing is queued or running here (no overflow call either)."""
        gate = self._gate
        return (
            gate is not None
            and self._submitted == self._finished
            and not self._spilled
            and gate.allows()
        )

    def _call_inline(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the calling (loop) thread, timed for the gate; only after
        `_may_inline()` said yes, with nothing awaited in between."""
        gate = self._gate
        assert gate is not None
        start = gate.clock()
        try:
            return fn(*args)
        finally:
            gate.record(gate.clock() - start)

    async def _spill(self, fn: Callable[[], T], gate: InlineGate | None) -> T:
        """Run `fn` in an anyio worker thread (this one is busy), timed for `gate`."""
        call: Call[T] = Call(fn, False, gate.clock if gate is not None else None)
        self._spilled += 1
        try:
            with anyio.CancelScope(shield=True):  # like the thread's wait: never abandoned
                await anyio.to_thread.run_sync(call.execute)
        finally:
            self._spilled -= 1
        if gate is not None:
            gate.record(call.elapsed)
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def _serve(self) -> None:
        jobs = self._jobs
        #: A call taken while gathering a group that does not belong to it: it runs next.
        carry: Call[Any] | None = None
        while True:
            call, carry = carry, None
            if call is None:
                try:
                    call = jobs.get(timeout=IDLE_SECONDS)
                except queue.Empty:
                    if self._exit_if_idle():
                        return
                    continue
                if call is None:  # woken by `close`
                    if self._closing and self._exit_if_idle():
                        return
                    continue
            calls = [call]
            if call.group:
                while len(calls) < GROUP_MAX:
                    try:
                        more = jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is not None and more.group:
                        calls.append(more)
                    else:
                        carry = more
                        break
            if len(calls) == 1:
                call.execute()
            else:
                self._run_group(calls)
            self._finished += len(calls)
            _finish(calls)
            if carry is None and self._closing and self._exit_if_idle():
                return

    def _exit_if_idle(self) -> bool:
        """Forget this thread if nothing is queued (a later call starts a new one)."""
        with self._life:
            if not self._jobs.empty():
                return False
            self._thread = None
            self._closing = False
            return True

    def close(self) -> None:
        """Let the thread exit once its queue is empty (a later call starts a new one)."""
        with self._life:
            if self._thread is not None:
                self._closing = True
                self._jobs.put(None)

    def _run_group(self, calls: list[Call[Any]]) -> None:
        assert self._group is not None
        try:
            self._group(calls)
        except BaseException as error:
            for call in calls:
                if call.error is None:
                    call.error = error
                    call.result = None
