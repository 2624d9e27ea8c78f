"""`agents.stream(progress=True)`, `agents.open()` and the final-flush rule of `run`/`stream`."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import stack
from test_run import SCRIPT, register_add

from framework import AbortController, Context
from plugins.agent import (
    NOT_DURABLE,
    USER,
    BlockEnd,
    MessageEnd,
    ProgressItem,
    RetryScheduled,
    StepStart,
    StreamItem,
    TextDelta,
    ToolCallStart,
    TurnEnd,
)
from plugins.llm_retry import RetryExecutor
from plugins.session_persistence import Config as PersistenceConfig
from plugins.session_persistence import SessionNotFoundError, mount_persistence
from plugins.session_persistence.testing import FaultInjector, open_tool_turn, replay
from plugins.session_persistence.testing.memory import MemoryBackend, MemoryStorage

pytestmark = pytest.mark.anyio


async def items_of(ctx: Context, prompt: str, **options: Any) -> list[StreamItem]:
    return [item async for item in ctx.agents.stream(prompt, **options)]


def names(items: list[StreamItem]) -> list[str]:
    return [type(item).__name__ for item in items]


async def test_progress_items_show_how_the_turn_gets_there() -> None:
    async with stack(SCRIPT, replay={"chunk_size": 3}) as ctx:
        items = await items_of(ctx, "2 + 3?", setup=register_add, progress=True)
    assert names(items) == (
        ["TurnStart", "StepStart"]
        + ["ReasoningDelta"] * 5
        + ["BlockEnd"]
        + ["TextDelta"] * 3
        + ["BlockEnd", "ToolCallStart", "BlockEnd", "ToolCallStart", "BlockEnd", "MessageEnd"]
        + ["ToolCall", "ToolResult", "ToolCall", "ToolResult", "StepStart"]
        + ["TextDelta"] * 5
        + ["BlockEnd", "MessageEnd", "TurnEnd"]
    )
    assert [i for i in items if isinstance(i, StepStart)] == [StepStart(1), StepStart(2)]
    assert [(i.block_type, i.step) for i in items if isinstance(i, BlockEnd)] == [
        ("reasoning", 1),
        ("text", 1),
        ("tool-call", 1),
        ("tool-call", 1),
        ("text", 2),
    ]
    assert [i for i in items if isinstance(i, ToolCallStart)] == [ToolCallStart(1)] * 2
    assert [i for i in items if isinstance(i, MessageEnd)] == [
        MessageEnd("Adding.", False, 1),
        MessageEnd("The sum is 5.", False, 2),
    ]


async def test_without_progress_the_stream_holds_the_same_content_items() -> None:
    async with stack(SCRIPT, replay={"chunk_size": 3}) as ctx:
        detailed = await items_of(ctx, "2 + 3?", session="a", setup=register_add, progress=True)
    async with stack(SCRIPT, replay={"chunk_size": 3}) as ctx:
        plain = await items_of(ctx, "2 + 3?", session="a", setup=register_add)
    content = [item for item in detailed if not isinstance(item, ProgressItem)]
    assert len(content) < len(detailed)
    assert names(plain) == names(content)
    # the same turn: the same deltas, calls and results (the usage differs by nothing either)
    assert [i for i in plain if not isinstance(i, TurnEnd)] == [
        i for i in content if not isinstance(i, TurnEnd)
    ]


async def test_an_aborted_response_ends_with_an_interrupted_message() -> None:
    controller = AbortController()
    seen: list[StreamItem] = []
    async with stack([{"text": "a long answer"}], replay={"delay_ms": 5}) as ctx:
        async for item in ctx.agents.stream("go", progress=True, signal=controller.signal):
            seen.append(item)
            if isinstance(item, TextDelta):
                controller.abort(USER)
    (message,) = [item for item in seen if isinstance(item, MessageEnd)]
    said = "".join(item.text for item in seen if isinstance(item, TextDelta))
    assert message == MessageEnd(said, True, 1)
    assert "a long answer".startswith(said)
    assert said != "a long answer"
    end = seen[-1]
    assert isinstance(end, TurnEnd)
    assert end.result.reason == {"kind": "aborted", "reason": USER}


async def instant(seconds: float, signal: Any) -> None:
    """The retry executor's backoff, without the wait."""


def retries(ctx: Context, _config: object) -> None:
    ctx.on(
        "agent/request-error", RetryExecutor(max_wait_ms=60_000, rand=lambda: 0.5, sleep=instant)
    )


async def test_a_retried_request_is_a_retry_item() -> None:
    script = [{"error": {"code": "RATE_LIMIT", "message": "slow down"}}, {"text": "ok"}]
    async with stack(script, extra=[retries]) as ctx:
        items = await items_of(ctx, "hi", progress=True)
    (retry,) = [item for item in items if isinstance(item, RetryScheduled)]
    assert (retry.retry, retry.code, retry.message, retry.step) == (1, "RATE_LIMIT", "slow down", 1)
    assert retry.delay_ms > 0
    assert names(items)[:4] == ["TurnStart", "StepStart", "RetryScheduled", "TextDelta"]
    end = items[-1]
    assert isinstance(end, TurnEnd)
    assert (end.result.reason, end.result.text) == ({"kind": "completed"}, "ok")


async def test_open_creates_then_finds_the_live_agent() -> None:
    async with stack([{"text": "x"}]) as ctx:
        created = await ctx.agents.open("fresh", meta={"cwd": "/somewhere"})
        live = await ctx.agents.open("fresh")
        new = await ctx.agents.open()
        assert (created.how, created.resumed, bool(created.repairs)) == ("created", False, False)
        assert created.agent.session.header["cwd"] == "/somewhere"
        assert (live.how, live.agent, live.session_id) == ("live", created.agent, "fresh")
        assert new.how == "created"
        assert new.session_id.startswith("s-")
        await live.dispose()
        assert ctx.agents.get("fresh") is None
        await created.dispose()  # the same registration: disposing twice is harmless


async def test_open_resumes_a_crashed_session_and_says_what_its_load_repaired(
    tmp_path: Path,
) -> None:
    async with stack(root=tmp_path) as ctx:
        handle = await ctx.agents.create("crashed")
        session = handle.agent.session
        replay(session, open_tool_turn(session.seq, started=True))
        await ctx.sessions.flush(session)
    (log,) = tmp_path.rglob("session.jsonl")
    torn = b'{"type":"tool/res'
    with log.open("ab") as file:
        file.write(torn)
    async with stack(root=tmp_path) as ctx:
        opened = await ctx.agents.open("crashed")
        assert (opened.how, opened.resumed) == ("resumed", True)
        assert (opened.repairs.unknown, opened.repairs.not_started) == (1, 0)
        assert opened.repairs.turns == (1,)
        (kept,) = opened.set_aside
        assert kept.size == len(torn)
        assert Path(kept.path).read_bytes() == torn
        again = await ctx.agents.open("crashed")
        assert (again.how, again.repairs, again.set_aside) == ("live", type(opened.repairs)(), ())


async def test_open_without_create_refuses_an_unknown_session(tmp_path: Path) -> None:
    async with stack(root=tmp_path) as ctx:
        with pytest.raises(SessionNotFoundError) as caught:
            await ctx.agents.open("nobody", create=False)
        assert caught.value.code == "SESSION_NOT_FOUND"
        assert str(caught.value) == 'session "nobody" not found'
        assert ctx.agents.list() == []
        assert await ctx.sessionPersistence.list() == []


def failing_disk(after: str) -> tuple[FaultInjector, Any]:
    """An in-memory backend whose writes fail with ENOSPC once an event of type `after` is
    appended; the plugin mounting it."""
    disk = FaultInjector(MemoryBackend(MemoryStorage()))

    async def mount(ctx: Context, _config: object) -> Any:
        def on_event(_session: Any, event: dict[str, Any]) -> None:
            if event["type"] == after:
                disk.fault = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        ctx.on("session/event", on_event)
        return await mount_persistence(ctx, disk, PersistenceConfig())

    return disk, mount


@pytest.mark.parametrize("flush_on_idle", [True, False])
async def test_a_turn_end_that_is_not_durable_is_not_completed(flush_on_idle: bool) -> None:
    _, mount = failing_disk(after="turn/end")
    agent = {"flush_on_idle": flush_on_idle}
    async with stack([{"text": "one"}, {"text": "two"}], extra=[mount], agent=agent) as ctx:
        result = await ctx.agents.run("hi", session="full")
        streamed = await items_of(ctx, "again", session="full")
    assert not result.completed
    assert result.reason["kind"] == "error"
    assert result.reason["error"]["code"] == NOT_DURABLE == "SESSION_NOT_DURABLE"
    assert result.reason["error"]["message"] == (
        "the turn ended (completed) but storing it failed: [Errno 28] No space left on device"
    )
    assert result.reason["turnReason"] == {"kind": "completed"}
    assert result.text == "one"  # the rest of the result is the turn's
    end = streamed[-1]
    assert isinstance(end, TurnEnd)
    assert end.result.reason["error"]["code"] == NOT_DURABLE


async def test_a_healthy_disk_completes_and_stores_the_turn_end() -> None:
    disk, mount = failing_disk(after="never/appended")
    async with stack([{"text": "one"}], extra=[mount]) as ctx:
        result = await ctx.agents.run("hi", session="fine")
        stored = await ctx.sessionPersistence.read_from("fine", 0)
    assert result.reason == {"kind": "completed"}
    assert stored[-1]["type"] == "turn/end"
    assert disk.appends


async def test_without_persistence_nothing_needs_storing() -> None:
    async with stack([{"text": "one"}]) as ctx:
        result = await ctx.agents.run("hi")
    assert result.completed
