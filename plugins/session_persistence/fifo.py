"""A first-in-first-out async mutex whose place in line is taken synchronously.

`anyio.Lock` is fair, but a caller only joins its line when it first awaits. The persistence
coordinator must also queue work from synchronous event listeners (`session/created`) in the order
the events happened, so here the place in line is a `Ticket` taken at once and waited on later.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType

import anyio


class Ticket:
    """One place in a `FifoLock`'s line; `async with ticket:` waits for its turn, then holds it."""

    __slots__ = ("_event", "_granted", "_lock")

    def __init__(self, lock: FifoLock, granted: bool) -> None:
        self._lock = lock
        self._granted = granted
        self._event: anyio.Event | None = None if granted else anyio.Event()

    async def __aenter__(self) -> None:
        if self._granted:
            return
        assert self._event is not None
        try:
            await self._event.wait()
        except BaseException:
            self._lock._abandon(self)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._lock._release()

    def _grant(self) -> None:
        self._granted = True
        assert self._event is not None
        self._event.set()


class FifoLock:
    """A mutex granted strictly in ticket order; `_idle` (a hook for subclasses) runs when
    nobody holds or waits any more."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        #: Made by the first waiter: most locks are taken and given back with nobody waiting.
        self._waiters: deque[Ticket] | None = None

    def ticket(self) -> Ticket:
        """Take the next place in line now; enter the ticket (`async with`) to wait for it."""
        if not self._held and not self._waiters:
            self._held = True
            return Ticket(self, granted=True)
        ticket = Ticket(self, granted=False)
        if self._waiters is None:
            self._waiters = deque()
        self._waiters.append(ticket)
        return ticket

    def _release(self) -> None:
        if self._waiters:
            self._waiters.popleft()._grant()
            return
        self._held = False
        self._idle()

    def _idle(self) -> None:
        """Nobody holds or waits any more (nothing to do here)."""

    def _abandon(self, ticket: Ticket) -> None:
        """A waiter gave up (cancelled): pass the lock on if it had already been granted."""
        if ticket._granted:
            self._release()
        else:
            assert self._waiters is not None
            self._waiters.remove(ticket)
