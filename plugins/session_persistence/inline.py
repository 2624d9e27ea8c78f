"""When a checkpoint write may run on the event loop's own thread (docs/performance.md).

Handing a write to the I/O thread costs two thread wake-ups, about as much as the `fsync` it
carries on a small machine. Running it on the loop thread saves that, but nothing else on the
loop runs meanwhile, so `InlineGate` allows it only while that is cheap and nobody else waits:

- the backend's `inlineWriteMaxMs` is above 0 (0, the default, never inlines);
- the coordinator counts at most one live session on this backend (`watch`);
- the backend's I/O thread has nothing queued or running (`IoThread` checks that);
- the last `WINDOW` eligible writes, wherever they ran, each took at most `inlineWriteMaxMs`.
  One slow write sends the following ones back to the thread, which keeps timing them, until
  `WINDOW` fast ones in a row have passed again.

Only appends to a log that already exists are eligible (`IoThread.run(..., inline=True)`):
creating a log, repairs and reads always run on the thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Protocol, runtime_checkable

from .backend import JsonObject

__all__ = ["WINDOW", "InlineGate", "Inlining", "WritesInline"]

#: Fast writes in a row needed before one may run inline.
WINDOW: Final = 16


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
        #: Eligible writes in a row that took at most `max_s`.
        self._fast = 0
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
            and self._fast >= self._window
        )

    def record(self, seconds: float) -> None:
        """How long an eligible write took, inline or on the thread."""
        self._fast = self._fast + 1 if seconds <= self.max_s else 0


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
