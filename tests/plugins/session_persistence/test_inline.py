"""The inline gate (`inline.InlineGate`) and the I/O thread's inline path (`offload.IoThread`).

The gate's rules are driven by a fake clock and injected durations; the backends' wiring is
checked by which thread made each fsync (JSONL) or ran each append (SQLite).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest
import sniffio

import plugins.session
import plugins.session_persistence_jsonl
import plugins.session_persistence_sqlite
from framework import Context
from plugins.session_persistence.inline import WINDOW, InlineGate
from plugins.session_persistence.offload import IoThread
from plugins.session_persistence.state import SessionTable
from plugins.session_persistence_sqlite.backend import SqliteBackend

pytestmark = pytest.mark.anyio


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def gate(max_ms: float = 2.0, sessions: int | None = 1) -> tuple[InlineGate, FakeClock]:
    clock = FakeClock()
    found = InlineGate(max_ms, clock=clock)
    if sessions is not None:
        found.watch(lambda: sessions)
    return found, clock


def warm(found: InlineGate, count: int = WINDOW, seconds: float = 0.001) -> None:
    for _ in range(count):
        found.record(seconds)


# -- the gate's rules -----------------------------------------------------------------------------


def test_inline_needs_a_full_window_of_fast_writes() -> None:
    found, _ = gate()
    warm(found, WINDOW - 1)
    assert not found.allows()
    found.record(0.002)  # exactly the bound counts as fast
    assert found.allows()


def test_one_slow_write_leaves_the_gate_open_a_second_in_the_window_closes_it() -> None:
    found, _ = gate()
    warm(found)
    found.record(0.0021)  # a lone spike
    assert found.allows()
    warm(found, WINDOW - 2)
    found.record(0.003)  # a second one while the first is still in the window
    assert not found.allows()
    found.record(0.001)  # the first leaves the window: one slow write left in it
    assert found.allows()
    warm(found, WINDOW)
    found.record(0.003)
    found.record(0.003)  # two in a row
    assert not found.allows()
    warm(found, WINDOW - 2)
    assert not found.allows()
    found.record(0.001)  # the first has left the window
    assert found.allows()


def test_a_stalled_write_closes_the_gate_alone_until_it_leaves_the_window() -> None:
    found, _ = gate()
    warm(found)
    found.record(0.02)  # ten times the bound is still one strike
    assert found.allows()
    warm(found, WINDOW)
    found.record(0.0201)  # over ten times the bound: a stall
    assert not found.allows()
    warm(found, WINDOW - 1)
    assert not found.allows()
    found.record(0.001)
    assert found.allows()


def test_more_than_one_live_session_never_inlines() -> None:
    live = [1]
    found = InlineGate(2.0, clock=FakeClock())
    found.watch(lambda: live[0])
    warm(found)
    assert found.allows()
    live[0] = 2
    assert not found.allows()
    live[0] = 0
    assert found.allows()


def test_zero_or_unwatched_never_inlines() -> None:
    off, _ = gate(max_ms=0)
    warm(off, 100, seconds=0.0)
    assert not off.enabled
    assert not off.allows()
    unwatched, _ = gate(sessions=None)
    warm(unwatched)
    assert not unwatched.allows()


# -- the I/O thread's inline path ---------------------------------------------------------------


def timed(clock: FakeClock, seconds: float, seen: list[int]) -> Callable[[], int]:
    """A call that takes `seconds` on the fake clock and records its thread."""

    def call() -> int:
        seen.append(threading.get_ident())
        clock.now += seconds
        return len(seen)

    return call


async def test_eligible_calls_move_to_the_loop_thread_once_the_gate_allows() -> None:
    found, clock = gate()
    io = IoThread("test", gate=found)
    seen: list[int] = []
    loop = threading.get_ident()
    for _ in range(WINDOW):
        await io.run(timed(clock, 0.001, seen), inline=True)
    assert loop not in seen  # measured on the thread first
    assert await io.run(timed(clock, 0.001, seen), inline=True) == WINDOW + 1
    assert seen[-1] == loop
    await io.run(timed(clock, 0.001, seen))  # not eligible: always the thread
    assert seen[-1] != loop
    await io.run(timed(clock, 0.050, seen), inline=True)  # inline, but stalled
    await io.run(timed(clock, 0.001, seen), inline=True)
    assert seen[-2] == loop
    assert seen[-1] != loop
    io.close()


async def test_nothing_runs_inline_while_the_thread_has_work() -> None:
    found, clock = gate()
    warm(found)
    io = IoThread("test", overflow=True, gate=found)
    release = threading.Event()
    started = threading.Event()
    seen: list[int] = []

    def blocking() -> None:
        started.set()
        release.wait()

    loop = threading.get_ident()
    async with anyio.create_task_group() as tg:
        tg.start_soon(io.run, blocking)
        await anyio.to_thread.run_sync(started.wait)
        await io.run(timed(clock, 0.001, seen), inline=True)  # the thread is busy: overflow
        release.set()
    assert seen
    assert seen[-1] != loop
    await io.run(timed(clock, 0.001, seen), inline=True)
    assert seen[-1] == loop
    io.close()


async def test_an_inline_failure_reaches_the_caller_and_counts_as_a_write() -> None:
    found, clock = gate()
    warm(found)
    io = IoThread("test", gate=found)

    def fail() -> None:
        clock.now += 0.05
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        await io.run(fail, inline=True)
    assert not found.allows()  # it stalled


# -- the backends -------------------------------------------------------------------------------


class FsyncThreads:
    """The thread of every `os.fsync` made while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[int] = []
        real = os.fsync

        def recording(fd: Any) -> None:
            self.threads.append(threading.get_ident())
            real(fd)

        monkeypatch.setattr(os, "fsync", recording)


async def _jsonl(ctx: Context, root: Path, max_ms: float) -> None:
    await ctx.plugin(plugins.session)
    config = {"root": str(root), "compression": "none", "inlineWriteMaxMs": max_ms}
    await ctx.plugin(plugins.session_persistence_jsonl, config)


async def _checkpoints(ctx: Context, session: Any, count: int) -> None:
    for index in range(count):
        session.append("step/start", {"turn": 1, "step": index + 1})
        await ctx.sessions.flush(session)


@pytest.mark.parametrize("max_ms", [1000.0, 0.0])
async def test_jsonl_one_live_session_fsyncs_on_the_loop_thread_only_when_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_ms: float
) -> None:
    fsyncs = FsyncThreads(monkeypatch)
    loop = threading.get_ident()
    async with Context() as ctx:
        await _jsonl(ctx, tmp_path, max_ms)
        session = ctx.sessions.create("solo", seed=[], meta={"cwd": "/w"})
        await _checkpoints(ctx, session, WINDOW + 4)
        inline = [thread == loop for thread in fsyncs.threads]
        stored = await ctx.sessionPersistence.load("solo")
    assert len(stored.events) == 1 + WINDOW + 4  # session/end-seed, then the steps
    # The first flush creates the log (never inline), the next WINDOW are measured on the
    # thread, the last three run inline.
    assert inline.count(True) == (3 if max_ms else 0)
    assert not max_ms or inline[-3:] == [True] * 3


async def test_jsonl_with_two_live_sessions_nothing_runs_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = FsyncThreads(monkeypatch)
    loop = threading.get_ident()
    async with Context() as ctx:
        await _jsonl(ctx, tmp_path, 1000.0)
        first = ctx.sessions.create("first", seed=[], meta={"cwd": "/w"})
        second = ctx.sessions.create("second", seed=[], meta={"cwd": "/w"})
        for _ in range(3):
            await _checkpoints(ctx, first, WINDOW)
            await _checkpoints(ctx, second, 1)
        assert fsyncs.threads
        assert loop not in fsyncs.threads
        ctx.sessions.dispose(second)
        await ctx.sessionPersistence.load("second")  # waits for its retirement
        await _checkpoints(ctx, first, WINDOW + 1)
        assert fsyncs.threads[-1] == loop  # alone again: inline


async def test_sqlite_one_live_session_appends_on_the_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    real = SqliteBackend._append_batch

    def recording(self: SqliteBackend, *args: Any) -> None:
        threads.append(threading.get_ident())
        real(self, *args)

    monkeypatch.setattr(SqliteBackend, "_append_batch", recording)
    loop = threading.get_ident()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        config = {"path": str(tmp_path / "s.sqlite3"), "inlineWriteMaxMs": 1000}
        await ctx.plugin(plugins.session_persistence_sqlite, config)
        session = ctx.sessions.create("solo", seed=[], meta={"cwd": "/w"})
        await _checkpoints(ctx, session, WINDOW + 3)
        other = ctx.sessions.create("other", seed=[], meta={"cwd": "/w"})
        await _checkpoints(ctx, session, 2)
        ctx.sessions.dispose(other)
        stored = await ctx.sessionPersistence.load("solo")
    assert len(stored.events) == 1 + WINDOW + 5
    assert loop not in threads[: WINDOW + 1]  # the create, then a window measured on the thread
    assert threads[WINDOW + 1 : WINDOW + 3] == [loop, loop]
    assert loop not in threads[WINDOW + 3 :]  # two live sessions


def test_the_field_defaults_to_off_and_refuses_negatives() -> None:
    for module in (plugins.session_persistence_jsonl, plugins.session_persistence_sqlite):
        assert module.Config().inline_write_max_ms == 0
        assert module.Config(inlineWriteMaxMs=2).inline_write_max_ms == 2
        with pytest.raises(pydantic.ValidationError):
            module.Config(inlineWriteMaxMs=-1)


async def test_a_lone_inline_flush_takes_no_ticket_and_no_awaited_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the gate is open a lone flush writes synchronously: neither the id's queue nor the
    backend's awaited `append_batch` is used, and the log holds every event."""
    awaited: list[int] = []
    tickets: list[str] = []
    real_append = SqliteBackend.append_batch
    real_ticket = SessionTable.ticket

    async def append(self: SqliteBackend, meta: Any, events: Any, **kw: Any) -> None:
        awaited.append(len(events))
        await real_append(self, meta, events, **kw)

    def ticket(self: SessionTable, session_id: str) -> Any:
        tickets.append(session_id)
        return real_ticket(self, session_id)

    monkeypatch.setattr(SqliteBackend, "append_batch", append)
    monkeypatch.setattr(SessionTable, "ticket", ticket)
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        config = {"path": str(tmp_path / "s.sqlite3"), "inlineWriteMaxMs": 1000}
        await ctx.plugin(plugins.session_persistence_sqlite, config)
        session = ctx.sessions.create("solo", seed=[], meta={"cwd": "/w"})
        await _checkpoints(ctx, session, WINDOW + 1)
        awaited.clear()
        tickets.clear()
        await _checkpoints(ctx, session, 3)
        assert awaited == []
        if sniffio.current_async_library() == "asyncio":  # trio: the drain's loop pass first
            assert tickets == []
        stored = await ctx.sessionPersistence.load("solo")
    assert [event["seq"] for event in stored.events] == list(range(WINDOW + 5))


async def test_a_lone_inline_flush_is_over_when_its_listener_returns(tmp_path: Path) -> None:
    """On asyncio a lone inline flush has nothing left to await once `session/flush`'s listener
    returns: it returns None, so the store awaits nothing, and the event is already in the log
    (trio's drain makes its loop pass first, so there the listener returns the drain)."""
    async with Context() as ctx:
        await _jsonl(ctx, tmp_path, 1000.0)
        session = ctx.sessions.create("solo", seed=[], meta={"cwd": "/w"})
        await _checkpoints(ctx, session, WINDOW + 1)
        live = ctx.sessionPersistence._coordinator.live
        log = Path(ctx.sessionPersistence.locate(session.header).path)
        session.append("step/start", {"turn": 1, "step": 99})
        pending = live.on_flush(session)
        if sniffio.current_async_library() == "asyncio":
            assert pending is None
        else:
            assert pending is not None
            await pending
        assert b'"step":99' in log.read_bytes().splitlines()[-1]
        assert live.on_flush(session) is None  # nothing pending: nothing to await either
