"""FifoLock: strict ticket order, synchronous places in line, cancellation hand-over."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from plugins.session_persistence.fifo import FifoLock

pytestmark = pytest.mark.anyio


async def test_granted_in_ticket_order_not_arrival_at_the_await() -> None:
    lock = FifoLock()
    order: list[str] = []
    first, second, third = lock.ticket(), lock.ticket(), lock.ticket()

    async def run(name: str, ticket: object) -> None:
        async with ticket:  # type: ignore[attr-defined]
            order.append(name)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "third", third)
        tg.start_soon(run, "second", second)
        tg.start_soon(run, "first", first)
    assert order == ["first", "second", "third"]


async def test_a_failure_does_not_block_the_next() -> None:
    lock = FifoLock()
    with pytest.raises(RuntimeError):
        async with lock.ticket():
            raise RuntimeError("boom")
    with anyio.fail_after(1):
        async with lock.ticket():
            pass


class _Reporting(FifoLock):
    """Records each time the lock becomes idle."""

    __slots__ = ("idle",)

    def __init__(self) -> None:
        super().__init__()
        self.idle: list[bool] = []

    def _idle(self) -> None:
        self.idle.append(True)


async def test_cancelled_waiter_leaves_the_line_and_idle_is_reported() -> None:
    lock = _Reporting()
    idle = lock.idle
    holder = lock.ticket()
    waiting = lock.ticket()
    after = lock.ticket()
    await holder.__aenter__()
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with waiting:
            pytest.fail("a cancelled waiter must not get the lock")
    await holder.__aexit__(None, None, None)
    with anyio.fail_after(1):
        async with after:
            pass
    assert idle == [True]
