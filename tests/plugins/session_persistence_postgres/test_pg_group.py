"""`GroupCommit`, the asyncio grouping under the PostgreSQL group commit (no server needed):
what goes in one group, and how a group's failure reaches its callers."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

from plugins.session_persistence_postgres.group import GroupCommit

pytestmark = pytest.mark.anyio

Item = tuple[str, int]


class Recorder:
    """A group runner recording each group; an item `("bad", n)` fails alone, a group holding
    `("boom", n)` fails as a whole."""

    def __init__(self) -> None:
        self.groups: list[list[Item]] = []
        self.done = 0

    async def __call__(self, items: Sequence[Item]) -> list[int | BaseException]:
        self.groups.append(list(items))
        await anyio.sleep(0.05)
        self.done += 1
        if any(key == "boom" for key, _ in items):
            raise OSError("commit failed")
        return [ValueError(n) if key == "bad" else n * 10 for key, n in items]


async def submit_all(group: GroupCommit[Item, int], items: Sequence[Item]) -> list[object]:
    """Submit every item at once; each one's result or error."""
    outcomes: list[object] = [None] * len(items)

    async def one(index: int, item: Item) -> None:
        try:
            outcomes[index] = await group.submit(item[0], item)
        except Exception as error:
            outcomes[index] = error

    async with anyio.create_task_group() as tg:
        for index, item in enumerate(items):
            tg.start_soon(one, index, item)
    return outcomes


async def test_waiting_items_go_together_one_per_key_at_most_max_size() -> None:
    run = Recorder()
    group: GroupCommit[Item, int] = GroupCommit(run, max_size=3)
    items = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("d", 5), ("e", 6)]
    assert await submit_all(group, items) == [10, 20, 30, 40, 50, 60]
    # "a"'s second item waits for the group after its first; order is kept otherwise.
    assert run.groups == [[("a", 1), ("b", 2), ("c", 4)], [("a", 3), ("d", 5), ("e", 6)]]


async def test_an_item_error_is_its_own_and_a_group_error_is_everyones() -> None:
    run = Recorder()
    group: GroupCommit[Item, int] = GroupCommit(run)
    outcomes = await submit_all(group, [("a", 1), ("bad", 2), ("c", 3)])
    assert outcomes[0] == 10
    assert outcomes[2] == 30
    assert isinstance(outcomes[1], ValueError)
    outcomes = await submit_all(group, [("a", 1), ("boom", 2), ("c", 3)])
    assert all(isinstance(error, OSError) for error in outcomes)
    assert await group.submit("a", ("a", 4)) == 40  # the next group runs as usual


async def test_a_cancelled_caller_waits_for_its_group() -> None:
    run = Recorder()
    group: GroupCommit[Item, int] = GroupCommit(run)
    with anyio.move_on_after(0.01):
        await group.submit("a", ("a", 1))
    assert run.done == 1  # its group had finished when the cancelled call returned
    await group.aclose()
