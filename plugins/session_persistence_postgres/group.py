"""Cross-session group commit on asyncio (docs/performance.md).

Appends submitted while a group is in flight wait together and go as the next group: one
`run(items)` call, which writes all of them in one transaction. At most `GROUP_MAX` items go in
one group, and at most one per key (session id): a session's next append waits for the group
after, so its checks see what the earlier one stored. The first submission while nothing is in
flight starts a group at once (a lone session waits for nobody).

One task runs the groups one after another. A caller waits for its group shielded from
cancellation: its write is never abandoned half-way, and its outcome (the stored `next_seq`) is
known when it returns. A group's `run` returns one outcome per item, a value or the exception
of that item alone; if `run` itself raises, every item of the group fails with that error.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import anyio

from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.offload import GROUP_MAX

__all__ = ["GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")

#: Writes a group: one outcome per item, in order (a result, or that item's exception).
GroupRun = Callable[[Sequence[T]], Awaitable[Sequence[R | BaseException]]]


class _Waiting(Generic[T, R]):
    __slots__ = ("future", "item", "key")

    def __init__(self, key: str, item: T, future: asyncio.Future[R]) -> None:
        self.key = key
        self.item = item
        self.future = future


class GroupCommit(Generic[T, R]):
    """Gathers the submissions of many sessions into groups, run one at a time by `run`."""

    def __init__(self, run: GroupRun[T, R], *, max_size: int = GROUP_MAX) -> None:
        self._run = run
        self._max_size = max_size
        self._waiting: deque[_Waiting[T, R]] = deque()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, key: str, item: T) -> R:
        """`item`'s outcome once its group has run (raising that item's error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append(_Waiting(key, item, future))
        if self._task is None:
            self._task = loop.create_task(self._drain(), name="dsh-postgres-group-commit")
        with anyio.CancelScope(shield=True):
            await asyncio.wait((future,))
        return future.result()

    def _take(self) -> list[_Waiting[T, R]]:
        """The next group: waiting items in order, one per key, at most `max_size`."""
        group: list[_Waiting[T, R]] = []
        keys: set[str] = set()
        later: deque[_Waiting[T, R]] = deque()
        while self._waiting and len(group) < self._max_size:
            waiting = self._waiting.popleft()
            if waiting.key in keys:
                later.append(waiting)
            else:
                keys.add(waiting.key)
                group.append(waiting)
        later.extend(self._waiting)
        self._waiting = later
        return group

    async def aclose(self) -> None:
        """Wait until every submitted item has had its group run."""
        while self._task is not None:
            with anyio.CancelScope(shield=True):
                await asyncio.wait((self._task,))

    async def _drain(self) -> None:
        try:
            while self._waiting:
                group = self._take()
                try:
                    outcomes = await self._run([waiting.item for waiting in group])
                except asyncio.CancelledError:
                    for waiting in group:
                        _settle(waiting.future, _interrupted())
                    raise
                except Exception as error:
                    outcomes = [error] * len(group)
                for waiting, outcome in zip(group, outcomes, strict=True):
                    _settle(waiting.future, outcome)
        finally:
            self._task = None
            # Items are left only when the task itself was cancelled (the loop is closing):
            # nothing of theirs was sent.
            while self._waiting:
                _settle(self._waiting.popleft().future, _interrupted())


def _interrupted() -> SessionPersistenceError:
    return SessionPersistenceError(
        "session-persistence-postgres: the event loop stopped the group commit before this "
        "write was confirmed"
    )


def _settle(future: asyncio.Future[R], outcome: R | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
