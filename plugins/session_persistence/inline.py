"""When a checkpoint write may run on the event loop's own thread (docs/performance.md).

Handing a write to the I/O thread costs two thread wake-ups, about as much as the `fsync` it
carries on a small machine. Running it on the loop thread saves that, but nothing else on the
loop runs meanwhile, so `InlineGate` allows it only while that is cheap and nobody else waits:

- the backend's `inlineWriteMaxMs` is above 0 (0, the default, never inlines);
- the coordinator counts at most one live session on this backend (`watch`);
- the backend's I/O thread has nothing queued or running (`IoThread` checks that);
- of the last `WINDOW` eligible writes, wherever they ran, fewer than `SLOW_SHUTS` took more
  than `inlineWriteMaxMs`, and none took more than `STALL` times it. A lone spike (a busy
  machine's preemption, a WAL checkpoint) leaves the gate open; a second one within the window,
  or one stall, sends the following writes back to the thread, which keeps timing them, until
  the slow ones have left the window.

Only appends to a log that already exists are eligible (`IoThread.run(..., inline=True)`):
creating a log, repairs and reads always run on the thread.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

from .backend import JsonObject

__all__ = ["SLOW_SHUTS", "STALL", "WINDOW", "InlineGate", "Inlining", "WritesInline"]

#: Eligible writes the gate judges by (the first `WINDOW` all run on the thread).
WINDOW: Final = 16
#: Slow writes within the window that shut the gate.
SLOW_SHUTS: Final = 2
#: A write over this many times the bound shuts the gate alone (a disk that stalls).
STALL: Final = 10


class InlineGate:
    """The inline rule of one backend; used on the loop thread only."""

    def __init__(
        self,
        max_ms: float,
        *,
        window: int = WINDOW,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.max_s = max_ms / 1000
        #: Times every eligible write (tests pass a fake one).
        self.clock = clock
        self._window = window
        #: The last `window` eligible writes' strikes: 0 fast, 1 slow, `SLOW_SHUTS` a stall.
        self._recent: deque[int] = deque(maxlen=window)
        #: The sum of `_recent`.
        self._strikes = 0
        self._sessions: Callable[[], int] | None = None

    @property
    def enabled(self) -> bool:
        return self.max_s > 0

    def watch(self, sessions: Callable[[], int]) -> None:
        """Count the backend's live sessions with `sessions` (unwatched: never inline)."""
        self._sessions = sessions

    def allows(self) -> bool:
        """Whether the next eligible write may run inline (the thread's idleness aside)."""
        return (
            self.max_s > 0
            and self._sessions is not None
            and self._sessions() <= 1
            and self._strikes < SLOW_SHUTS
            and len(self._recent) == self._window
        )

    def record(self, seconds: float) -> None:
        """How long an eligible write took, inline or on the thread."""
        recent = self._recent
        if len(recent) == self._window:
            self._strikes -= recent[0]  # about to leave the window
        strike = 0 if seconds <= self.max_s else 1 if seconds <= self.max_s * STALL else SLOW_SHUTS
        recent.append(strike)
        self._strikes += strike


@runtime_checkable
class Inlining(Protocol):
    """A backend whose checkpoint writes may run inline under `inline_gate`."""

    inline_gate: InlineGate


@runtime_checkable
class WritesInline(Protocol):
    """A live encoder whose backend can append synchronously, so a lone flush runs from
    `sessions.flush` to the `fsync` without an `await` below the write controller."""

    def append_inline(self, meta: JsonObject, events: list[JsonObject]) -> bool:
        """Append a materialized session's `events` durably on the calling thread when the
        gate allows it now (True); else do nothing (False: take the awaited path)."""
