"""The write controller (docs/persistence.md): window, drains, group commit, failure retention."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from types import SimpleNamespace

import anyio
import anyio.lowlevel
import pytest
import sniffio
from anyio.abc import TaskGroup

from plugins.session_persistence import timers as timers_module
from plugins.session_persistence.testing import FakeClock
from plugins.session_persistence.timers import Timers, Window
from plugins.session_persistence.writer import WriteController

pytestmark = pytest.mark.anyio

LABEL = 'session-persistence-test: background write for session "s1"'


class Recorder:
    """The controller's write hook: records batches; can be gated or made to fail."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate: anyio.Event | None = None
        self.started = anyio.Event()
        self.fail: Exception | None = None
        self.attempts = 0

    async def __call__(self, batch: list[dict[str, int]]) -> None:
        self.attempts += 1
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        await anyio.lowlevel.checkpoint()
        if self.fail is not None:
            raise self.fail
        self.batches.append([event["seq"] for event in batch])


@pytest.fixture
async def tg() -> AsyncIterator[TaskGroup]:
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


def controller(
    tg: TaskGroup, recorder: Recorder, clock: FakeClock, write_now: WriteNow | None = None
) -> WriteController:
    ready = anyio.Event()
    ready.set()
    return WriteController(
        label=LABEL,
        write=recorder,
        ready=ready,
        timers=Timers(clock, 0.2, tg.start_soon),
        write_now=write_now,
    )


def ev(seq: int) -> dict[str, int]:
    return {"seq": seq}


async def test_events_inside_the_window_make_one_background_write(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    for seq in range(1, 20):  # events at t = 0, 10, ..., 190 ms
        await clock.advance(10)
        writer.enqueue(ev(seq))
    await anyio.wait_all_tasks_blocked()
    assert rec.batches == []
    await clock.advance(10)
    await writer.flush()
    assert rec.batches == [list(range(20))]


async def test_the_deadline_is_never_extended(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    await clock.advance(150)
    writer.enqueue(ev(1))
    await clock.advance(49)
    assert rec.batches == []
    await clock.advance(1)
    assert rec.batches == [[0, 1]]


async def test_flush_with_nothing_pending_does_no_io(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    writer = controller(tg, rec, clock)
    await writer.flush()
    writer.enqueue(ev(0))
    await writer.flush()
    await writer.flush()
    await clock.advance(1000)  # the flush disarmed the window
    assert rec.batches == [[0]]


async def test_concurrent_flushes_share_one_write(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    writer = controller(tg, rec, clock)

    async def step(seq: int) -> None:
        writer.enqueue(ev(seq))
        await writer.flush()

    async with anyio.create_task_group() as inner:
        for seq in range(8):
            inner.start_soon(step, seq)
    assert len(rec.batches) == 1
    assert sorted(rec.batches[0]) == list(range(8))  # trio starts tasks in random order


async def test_a_lone_flush_on_asyncio_makes_no_loop_pass(
    tg: TaskGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[list[int]] = []

    async def write(batch: list[dict[str, int]]) -> None:
        batches.append([event["seq"] for event in batch])

    ready = anyio.Event()
    ready.set()
    writer = WriteController(
        label=LABEL, write=write, ready=ready, timers=Timers(FakeClock(), 0.2, tg.start_soon)
    )
    writer.enqueue(ev(0))
    await writer.flush()
    await anyio.wait_all_tasks_blocked()  # the timers' runner has started and sleeps
    passes: list[None] = []
    checkpoint = anyio.lowlevel.checkpoint

    async def counted() -> None:
        passes.append(None)
        await checkpoint()

    monkeypatch.setattr(anyio.lowlevel, "checkpoint", counted)
    writer.enqueue(ev(1))
    await writer.flush()
    assert batches == [[0], [1]]
    # Nothing else was ready: the pass would have come straight back (trio cannot tell).
    assert len(passes) == (sniffio.current_async_library() == "trio")


async def test_flushes_during_an_inflight_write_add_at_most_one_more(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    rec.gate = anyio.Event()
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    await clock.advance(200)
    await rec.started.wait()

    async def step(seq: int) -> None:
        writer.enqueue(ev(seq))
        await writer.flush()

    async with anyio.create_task_group() as inner:
        for seq in range(1, 6):
            inner.start_soon(step, seq)
        await anyio.wait_all_tasks_blocked()
        rec.gate.set()
    assert len(rec.batches) == 2
    assert rec.batches[0] == [0]
    assert sorted(rec.batches[1]) == [1, 2, 3, 4, 5]


async def test_a_drain_writes_events_admitted_meanwhile_before_returning(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    rec.gate = anyio.Event()
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    done = anyio.Event()

    async def flush() -> None:
        await writer.flush()
        done.set()

    tg.start_soon(flush)
    await rec.started.wait()
    writer.enqueue(ev(1))  # during a drain events are only queued, no window is armed
    rec.gate.set()
    await done.wait()
    await clock.advance(1000)
    assert rec.batches == [[0], [1]]


async def test_background_failure_warns_once_pauses_and_keeps_the_batch(
    tg: TaskGroup, caplog: pytest.LogCaptureFixture
) -> None:
    clock, rec = FakeClock(), Recorder()
    rec.fail = OSError("disk full")
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    writer.enqueue(ev(1))
    with caplog.at_level(logging.WARNING, logger="plugins.session_persistence"):
        await clock.advance(200)
        await clock.advance(1000)
    assert [r.getMessage() for r in caplog.records] == [
        f"{LABEL} failed (buffered events retained): disk full"
    ]
    assert rec.attempts == 1  # paused until the next enqueue or flush
    with pytest.raises(OSError, match="disk full"):
        await writer.flush()
    assert [e["seq"] for e in writer.pending] == [0, 1]
    rec.fail = None
    writer.enqueue(ev(2))  # unpauses and re-arms the window
    await clock.advance(200)
    assert rec.batches == [[0, 1, 2]]
    assert rec.attempts == 3


async def test_a_failed_drain_rejects_every_joined_flush(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    rec.fail = OSError("EIO")
    writer = controller(tg, rec, clock)
    errors: list[BaseException] = []

    async def step(seq: int) -> None:
        writer.enqueue(ev(seq))
        try:
            await writer.flush()
        except OSError as error:
            errors.append(error)

    async with anyio.create_task_group() as inner:
        for seq in range(3):
            inner.start_soon(step, seq)
    assert len(errors) == 3
    assert sorted(e["seq"] for e in writer.pending) == [0, 1, 2]
    assert rec.batches == []


async def test_a_cancelled_flush_hands_the_drain_over(tg: TaskGroup) -> None:
    clock, rec = FakeClock(), Recorder()
    writer = controller(tg, rec, clock)
    rec.gate = anyio.Event()
    writer.enqueue(ev(0))
    await clock.advance(200)
    await rec.started.wait()  # a background write is in flight
    writer.enqueue(ev(1))
    with anyio.move_on_after(0.01):
        await writer.flush()  # starts a drain waiting on the in-flight write, then cancelled
    rec.gate.set()
    with anyio.fail_after(2):
        await writer.flush()
    assert rec.batches == [[0], [1]]


async def test_a_lone_flush_cancelled_before_writing_leaves_the_batch_to_the_window(
    tg: TaskGroup,
) -> None:
    clock, rec = FakeClock(), Recorder()
    rec.gate = anyio.Event()
    writer = controller(tg, rec, clock)
    writer.enqueue(ev(0))
    async with anyio.create_task_group() as inner:
        inner.start_soon(writer.flush)
        await rec.started.wait()  # the write hook was entered but had not written yet
        inner.cancel_scope.cancel()
    rec.gate.set()
    assert rec.batches == []
    await clock.advance(200)
    assert rec.batches == [[0]]


async def test_windows_a_flush_cancels_do_not_wake_the_timer_runner(
    tg: TaskGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[anyio.Event] = []

    def event() -> anyio.Event:
        made.append(anyio.Event())
        return made[-1]

    monkeypatch.setattr(timers_module, "anyio", SimpleNamespace(Event=event))
    clock = FakeClock()
    timers = Timers(clock, 0.25, tg.start_soon)  # binary-exact times
    fired: list[Window] = []

    async def fire(window: Window) -> None:
        fired.append(window)

    for _ in range(50):  # a lone session's steps: armed, then cancelled by the step's flush
        timers.arm(fire).cancel()
        await anyio.wait_all_tasks_blocked()
    assert made == []  # the runner polls: no wake per arm
    await clock.advance(250)  # a whole window with no arm: the runner parks
    await clock.advance(250)
    assert len(made) == 1
    window = timers.arm(fire)  # wakes the parked runner
    await clock.advance(125)
    assert fired == []
    await clock.advance(125)
    await anyio.wait_all_tasks_blocked()
    assert fired == [window]
    late = timers.arm(fire)  # armed while the runner polls: still fires at its own deadline
    await clock.advance(125)
    assert fired == [window]
    await clock.advance(125)
    await anyio.wait_all_tasks_blocked()
    assert fired == [window, late]


class WriteNow:
    """The controller's `write_now` hook: records batches; can decline or fail."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.batches: list[list[int]] = []
        self.fail: Exception | None = None

    def __call__(self, batch: list[dict[str, int]]) -> bool:
        if self.fail is not None:
            raise self.fail
        if self.answer:
            self.batches.append([event["seq"] for event in batch])
        return self.answer


async def test_a_batch_written_at_once_skips_the_awaited_write(tg: TaskGroup) -> None:
    rec, now = Recorder(), WriteNow()
    writer = controller(tg, rec, FakeClock(), now)
    for seq in range(3):
        writer.enqueue(ev(seq))
    await writer.flush()
    assert now.batches == [[0, 1, 2]]
    assert rec.attempts == 0
    assert writer.pending == []


async def test_a_declined_write_at_once_falls_back_to_the_awaited_write(tg: TaskGroup) -> None:
    rec, now = Recorder(), WriteNow(answer=False)
    writer = controller(tg, rec, FakeClock(), now)
    for seq in range(3):
        writer.enqueue(ev(seq))
    await writer.flush()
    assert rec.batches == [[0, 1, 2]]
    assert writer.pending == []


async def test_a_failed_write_at_once_keeps_the_batch_for_the_next_flush(tg: TaskGroup) -> None:
    rec, now = Recorder(), WriteNow()
    now.fail = OSError(28, "No space left on device")
    writer = controller(tg, rec, FakeClock(), now)
    writer.enqueue(ev(0))
    with pytest.raises(OSError, match="No space"):
        await writer.flush()
    assert [event["seq"] for event in writer.pending] == [0]
    writer.enqueue(ev(1))
    now.fail = None
    await writer.flush()
    assert now.batches == [[0, 1]]
    assert rec.attempts == 0
