"""Test helpers for persistence backends: a fake clock (the contract suite follows)."""

from __future__ import annotations

import anyio


class FakeClock:
    """A manual clock for the batching window: pass `clock.sleep` as `mount_persistence(sleep=)`.

    `sleep(s)` waits until `advance` has moved the clock past its deadline.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, anyio.Event]] = []

    async def sleep(self, seconds: float) -> None:
        wake = anyio.Event()
        entry = (self.now + seconds, wake)
        self._sleepers.append(entry)
        try:
            await wake.wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def advance(self, ms: float) -> None:
        """Let armed timers start, move time forward, wake the sleepers due, let them run."""
        await anyio.wait_all_tasks_blocked()
        self.now += ms / 1000
        for deadline, wake in list(self._sleepers):
            if deadline <= self.now + 1e-9:
                wake.set()
        await anyio.wait_all_tasks_blocked()

    @property
    def sleepers(self) -> int:
        """How many timers are armed."""
        return len(self._sleepers)
