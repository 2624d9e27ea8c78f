"""The backends' long-lived I/O thread (`offload.IoThread`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import anyio
import pytest

from plugins.session_persistence import offload
from plugins.session_persistence.offload import IoThread

pytestmark = pytest.mark.anyio


async def test_calls_run_off_the_loop_in_order_on_one_thread() -> None:
    io = IoThread("test")
    seen: list[tuple[int, int]] = []
    loop_thread = threading.get_ident()

    def record(index: int) -> int:
        seen.append((index, threading.get_ident()))
        return index * 2

    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(io.run, record, index)
            await anyio.lowlevel.checkpoint()
    assert [index for index, _ in seen] == list(range(20))
    assert len({thread for _, thread in seen}) == 1
    assert seen[0][1] != loop_thread
    assert await io.run(record, 21) == 42


async def test_an_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await IoThread("test").run(fail)


async def test_a_cancelled_caller_waits_for_its_call_to_finish() -> None:
    io = IoThread("test")
    started = threading.Event()
    finished: list[bool] = []

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.append(True)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(io.run, slow)
            await anyio.to_thread.run_sync(started.wait)
            scope.cancel()
    assert finished == [True]


async def test_overflow_runs_a_call_beside_a_busy_thread() -> None:
    io = IoThread("test", overflow=True)
    release = threading.Event()
    threads: list[int] = []

    def held() -> None:
        threads.append(threading.get_ident())
        release.wait(5)

    def quick() -> None:
        threads.append(threading.get_ident())
        release.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(io.run, held)
            await anyio.sleep(0.05)
            await io.run(quick)  # would deadlock if it queued behind `held`
    assert len(set(threads)) == 2


async def test_an_idle_thread_exits_and_a_new_one_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offload, "IDLE_SECONDS", 0.05)
    io = IoThread("test")
    first = await io.run(threading.get_ident)
    await anyio.sleep(0.3)
    assert not any(t.ident == first and t.is_alive() for t in threading.enumerate())
    assert await io.run(lambda: 7) == 7


async def test_close_lets_the_thread_go_and_a_later_call_starts_another() -> None:
    io = IoThread("test")
    first = await io.run(threading.get_ident)
    io.close()
    for _ in range(200):
        if not any(t.ident == first and t.is_alive() for t in threading.enumerate()):
            break
        await anyio.sleep(0.01)
    else:
        raise AssertionError("the closed thread is still alive")
    assert await io.run(lambda: 7) == 7


async def test_a_call_queued_behind_a_group_runs_after_it_alone_in_order() -> None:
    units: list[list[object]] = []

    def runner(calls: Sequence[offload.Call[Any]]) -> None:
        for call in calls:
            call.execute()
        units.append([call.result for call in calls])

    io = IoThread("test", group=runner)
    started, release = threading.Event(), threading.Event()
    #: The order the I/O thread ran the calls in (callers may resume in another order: trio
    #: shuffles the tasks woken in one batch).
    ran: list[str] = []

    def block() -> str:
        started.set()
        release.wait(10)
        ran.append("block")
        return "block"

    def named(name: str) -> str:
        ran.append(name)
        return name

    results: dict[str, str] = {}

    async def submit(name: str, fn: Callable[[], str], group: bool) -> None:
        results[name] = await io.run(fn, group=group)

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "block", block, True)
        await anyio.to_thread.run_sync(started.wait, 10)
        for name, group in (("g1", True), ("g2", True), ("alone", False), ("g3", True)):
            tg.start_soon(submit, name, partial(named, name), group)
            await anyio.wait_all_tasks_blocked()
        release.set()
    assert units == [["g1", "g2"]]  # "block" ran alone; "g3" is a group of one
    assert ran == ["block", "g1", "g2", "alone", "g3"]
    assert results == {name: name for name in ran}


async def test_close_while_busy_finishes_the_queue_then_lets_the_thread_go() -> None:
    io = IoThread("test")
    started, release = threading.Event(), threading.Event()

    def block() -> int:
        started.set()
        release.wait(10)
        return threading.get_ident()

    idents: list[int] = []

    async def submit() -> None:
        idents.append(await io.run(block))

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        await anyio.to_thread.run_sync(started.wait, 10)
        tg.start_soon(submit)
        await anyio.wait_all_tasks_blocked()
        io.close()
        release.set()
    assert len(set(idents)) == 1
    for _ in range(200):
        if not any(t.ident == idents[0] and t.is_alive() for t in threading.enumerate()):
            break
        await anyio.sleep(0.01)
    else:
        raise AssertionError("the closed thread is still alive")
    assert await io.run(lambda: 7) == 7


async def test_a_group_wakes_its_callers_with_one_hand_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every hand-off to the loop is a callback and a wake-up write: a group of calls that
    # finished together wakes all its callers with one.
    hand_offs: list[object] = []
    counted: dict[offload.Wake, offload.Wake] = {}
    signal = offload._signal

    def counting_signal() -> tuple[offload.Done, offload.Wake]:
        done, wake = signal()

        def counting(*args: object) -> object:
            hand_offs.append(args)
            return wake(*args)

        return done, counted.setdefault(wake, counting)

    monkeypatch.setattr(offload, "_signal", counting_signal)

    def runner(calls: Sequence[offload.Call[Any]]) -> None:
        for call in calls:
            call.execute()

    io = IoThread("test", group=runner)
    started, release = threading.Event(), threading.Event()

    def block() -> str:
        started.set()
        release.wait(10)
        return "block"

    results: list[str] = []

    async def submit(fn: Callable[[], str]) -> None:
        results.append(await io.run(fn, group=True))

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, block)
        await anyio.to_thread.run_sync(started.wait, 10)
        for name in ("a", "b", "c"):
            tg.start_soon(submit, partial(str, name))
            await anyio.wait_all_tasks_blocked()
        release.set()
    assert sorted(results) == ["a", "b", "block", "c"]
    assert len(hand_offs) == 2  # "block" alone, then the group of three


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_caller_cancelled_outside_anyio_leaves_the_thread_working() -> None:
    # asyncio's own `Task.cancel` cancels the future the caller waits on (anyio's shield only
    # holds anyio's cancellations); finishing that call later must not fail on the loop.
    import asyncio

    failures: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(
        lambda _loop, context: failures.append(context)
    )
    io = IoThread("test")
    started, release = threading.Event(), threading.Event()

    def held() -> str:
        started.set()
        release.wait(10)
        return "held"

    task = asyncio.ensure_future(io.run(held))
    await anyio.to_thread.run_sync(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    assert await io.run(lambda: 7) == 7
    await anyio.sleep(0.01)
    assert failures == []
