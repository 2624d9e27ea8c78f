"""Batching-window timers: one background task fires every window of a service.

Every window of a service has the same length, so windows expire in the order they were armed:
arming appends to a FIFO queue (O(1), no task spawned), cancelling only marks the window, and a
single runner task sleeps until the oldest live deadline. Only a window that really expires
costs a task (its background write). A window a flush cancels costs no wake either: once windows
are being armed, an idle runner polls once per window length instead of being woken by each arm
(a window armed during that sleep closes no earlier than the sleep ends), and it parks (woken by
the next arm) only after a whole window length with no arm.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio

#: Starts a background task (a task group's `start_soon`).
Spawn = Callable[..., object]


class Clock(Protocol):
    """Where the windows' time comes from (`SystemClock`, or a test's fake clock)."""

    def now(self) -> float:
        """The current time in seconds."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return once `now()` has reached `deadline`."""
        ...


class SystemClock:
    """The event loop's clock."""

    def now(self) -> float:
        return anyio.current_time()

    async def sleep_until(self, deadline: float) -> None:
        await anyio.sleep_until(deadline)


class Window:
    """One armed batching window; `cancel()` disarms it."""

    __slots__ = ("cancelled", "deadline", "fire")

    def __init__(self, deadline: float, fire: Callable[[Window], Coroutine[Any, Any, None]]):
        self.deadline = deadline
        self.fire = fire
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Timers:
    """Arms windows of `delay_s` seconds; each due window runs `fire(window)` as a new task."""

    def __init__(self, clock: Clock, delay_s: float, spawn: Spawn) -> None:
        self._clock = clock
        self._delay_s = delay_s
        self._spawn = spawn
        self._queue: deque[Window] = deque()
        self._wake: anyio.Event | None = None
        self._started = False
        #: A window was armed since the idle runner last looked (it polls instead of parking).
        self._armed = False

    def arm(self, fire: Callable[[Window], Coroutine[Any, Any, None]]) -> Window:
        """A window closing `delay_s` from now."""
        window = Window(self._clock.now() + self._delay_s, fire)
        queue = self._queue
        while queue and queue[0].cancelled:  # a polling runner has not dropped them yet
            queue.popleft()
        queue.append(window)
        self._armed = True
        if not self._started:
            self._started = True
            self._spawn(self._run)
        elif self._wake is not None:
            wake, self._wake = self._wake, None
            wake.set()
        return window

    async def _run(self) -> None:
        queue = self._queue
        while True:
            while queue and queue[0].cancelled:
                queue.popleft()
            if not queue:
                if self._armed:
                    self._armed = False
                    await self._clock.sleep_until(self._clock.now() + self._delay_s)
                else:
                    wake = self._wake = anyio.Event()
                    await wake.wait()
                continue
            head = queue[0]
            await self._clock.sleep_until(head.deadline)
            # Later windows have later deadlines: everything due now is at the front.
            now = self._clock.now()
            while queue and queue[0].deadline <= now:
                window = queue.popleft()
                if not window.cancelled:
                    self._spawn(window.fire, window)
