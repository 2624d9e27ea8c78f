"""`agents.run()` and `agents.stream()`: one turn to idle, as a result and as typed items."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_helpers import call, stack

from framework import AbortController
from plugins.agent import (
    USER,
    AgentError,
    AgentOptions,
    ReasoningDelta,
    RunResult,
    TextDelta,
    ToolCall,
    ToolResult,
    ToolRun,
    TurnEnd,
    TurnStart,
    Usage,
)
from plugins.session import Session
from plugins.tools import tool

pytestmark = pytest.mark.anyio


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def register_add(agent_ctx: Any) -> None:
    agent_ctx.tools.register(add)


SCRIPT = [
    {
        "reasoning": "Use the tool.",
        "text": "Adding.",
        "tool_calls": [call("c1", "add", {"a": 2, "b": 3}), call("c2", "add", {"a": "x"})],
    },
    {"text": "The sum is 5."},
]


def usage_in(events: list[dict[str, Any]]) -> Usage:
    total = Usage()
    for event in events:
        if event["type"] == "assistant/message" and "usage" in event["data"]:
            total = total.plus(event["data"]["usage"])
    return total


async def test_run_returns_the_turn_with_tools_and_usage() -> None:
    async with stack(SCRIPT) as ctx:
        result = await ctx.agents.run("What is 2 + 3?", session="s1", setup=register_add)
        agent = ctx.agents.get("s1")
        assert agent is not None
        assert agent.status == "idle"
        events = agent.session.events
    assert isinstance(result, RunResult)
    assert (result.session_id, result.turn, result.reason) == ("s1", 1, {"kind": "completed"})
    assert result.completed
    assert result.text == "The sum is 5."
    first, second = result.tool_calls
    assert first == ToolRun(
        ToolCall("c1", "add", {"a": 2, "b": 3}, 1),
        ToolResult("c1", "add", False, "5", [{"type": "text", "text": "5"}], None, 1),
    )
    assert second.call == ToolCall("c2", "add", {"a": "x"}, 1)
    assert second.result is not None
    assert second.result.is_error
    assert second.result.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert second.result.text == (
        'Error: invalid arguments: missing required property "arguments.b"; '
        '"arguments.a" must be an integer'
    )
    assert result.usage == usage_in(events)
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


async def test_stream_yields_the_turn_as_it_happens() -> None:
    async with stack(SCRIPT, replay={"chunk_size": 3}) as ctx:
        items = [item async for item in ctx.agents.stream("2 + 3?", setup=register_add)]
    start, *middle, end = items
    assert isinstance(start, TurnStart)
    assert start.turn == 1
    assert isinstance(end, TurnEnd)
    assert end.result.session_id == start.session_id
    kinds = [type(item).__name__ for item in middle]
    # deltas come in pieces; the (exclusive) calls run one after the other, in model order
    assert kinds == (
        ["ReasoningDelta"] * 5
        + ["TextDelta"] * 3
        + ["ToolCall", "ToolResult", "ToolCall", "ToolResult"]
        + ["TextDelta"] * 5
    )
    reasoning = "".join(i.text for i in middle if isinstance(i, ReasoningDelta))
    assert reasoning == "Use the tool."
    texts = [i for i in middle if isinstance(i, TextDelta)]
    assert "".join(t.text for t in texts if t.step == 2) == end.result.text == "The sum is 5."
    assert "".join(t.text for t in texts if t.step == 1) == "Adding."
    results = [i for i in middle if isinstance(i, ToolResult)]
    assert [r.text for r in results] == [
        run.result.text for run in end.result.tool_calls if run.result
    ]


async def test_run_and_stream_leave_no_listener_behind() -> None:
    async with stack([{"text": "one"}, {"text": "two"}, {"text": "three"}]) as ctx:

        def counts() -> tuple[int, int]:
            return len(ctx.listeners("session/event")), len(ctx.listeners("agent/status"))

        before = counts()
        await ctx.agents.run("first", session="tidy")
        assert counts() == before  # at once, not when a generator is collected
        async for _ in ctx.agents.stream("second", session="tidy"):
            pass
        assert counts() == before
        async with aclosing(ctx.agents.stream("third", session="tidy")) as items:
            async for _ in items:
                break
        assert counts() == before


async def test_a_second_run_continues_the_live_session() -> None:
    async with stack([{"text": "one"}, {"text": "two"}]) as ctx:
        first = await ctx.agents.run("first")
        second = await ctx.agents.run("second", session=first.session_id)
        agent = ctx.agents.get(first.session_id)
        assert agent is not None
        prompts = [
            e["data"]["content"] for e in agent.session.events if e["type"] == "user/message"
        ]
    assert first.session_id.startswith("s-")
    assert (first.turn, first.text, second.turn, second.text) == (1, "one", 2, "two")
    assert prompts == [[{"type": "text", "text": "first"}], [{"type": "text", "text": "second"}]]


async def test_a_stored_session_is_resumed(tmp_path: Path) -> None:
    async with stack([{"text": "stored"}], root=tmp_path) as ctx:
        first = await ctx.agents.run("hello", session="kept")
    # a new process: the replay script starts over, the log continues
    async with stack([{"text": "resumed"}], root=tmp_path) as ctx:
        sources: list[str] = []
        ctx.on("agent/session-start", lambda event: sources.append(event.source))
        second = await ctx.agents.run("again", session="kept")
    assert (first.turn, second.turn, second.text, sources) == (1, 2, "resumed", ["resume"])


async def test_a_failed_turn_is_a_result_not_an_exception() -> None:
    async with stack([{"error": {"code": "RATE_LIMIT", "message": "slow down"}}]) as ctx:
        result = await ctx.agents.run("hi")
    assert not result.completed
    assert result.reason == {
        "kind": "error",
        "error": {"code": "RATE_LIMIT", "message": "slow down"},
    }
    assert (result.text, result.tool_calls) == ("", [])


async def test_a_running_agent_is_refused() -> None:
    async with stack([{"text": "slow answer"}, {"text": "x"}], replay={"delay_ms": 20}) as ctx:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: ctx.agents.run("first", session="busy"))
            await anyio.sleep(0.05)
            with pytest.raises(AgentError) as caught:
                await ctx.agents.run("second", session="busy")
        assert caught.value.code == "AGENT_BUSY"
        assert str(caught.value).startswith('agent "busy" is running: run() and stream() start')


async def test_prompts_queued_before_run_first_and_the_result_is_this_prompts_turn() -> None:
    async with stack([{"text": "to the left over"}, {"text": "to the new one"}]) as ctx:
        handle = await ctx.agents.create("queued")
        handle.agent.inbox.insert("next-turn", "left over")  # queued, not yet woken
        starts = []
        async with aclosing(ctx.agents.stream("new", session="queued")) as items:
            async for item in items:
                if isinstance(item, TurnStart):
                    starts.append(item.turn)
                last = item
        assert isinstance(last, TurnEnd)
        result = last.result
        prompts = [
            e["data"]["content"][0]["text"]
            for e in handle.agent.session.events
            if e["type"] == "user/message"
        ]
    assert (starts, result.turn, result.text, result.completed) == (
        [2],
        2,
        "to the new one",
        True,
    )
    assert prompts == ["left over", "new"]


async def test_opening_options_apply_once() -> None:
    opened: list[str] = []

    def setup(agent_ctx: Any) -> None:
        opened.append("setup")
        agent_ctx.tools.register(add)  # a second registration on this agent would fail

    async with stack([{"text": "a"}, {"text": "b"}]) as ctx:
        options = AgentOptions("replay", "model-a", None, "Be brief.")
        first = await ctx.agents.run("a", session="open", agent_options=options, setup=setup)
        second = await ctx.agents.run("b", session="open", agent_options=options, setup=setup)
        agent = ctx.agents.get("open")
        assert agent is not None
        assert agent.options == options
    assert opened == ["setup"]
    assert (first.text, second.text, second.turn) == ("a", "b", 2)


async def test_the_signal_cancels_the_turn_with_its_reason() -> None:
    async with stack([{"text": "a long answer"}], replay={"delay_ms": 20}) as ctx:
        controller = AbortController()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _abort_after(controller, 0.05))
            result = await ctx.agents.run("go", signal=controller.signal)
    assert result.reason == {"kind": "aborted", "reason": USER}


async def _abort_after(controller: AbortController, seconds: float) -> None:
    await anyio.sleep(seconds)
    controller.abort(USER)


async def test_leaving_the_stream_early_cancels_the_turn() -> None:
    async with stack([{"text": "a long answer"}], replay={"delay_ms": 5}) as ctx:
        async with aclosing(ctx.agents.stream("go", session="left")) as items:
            async for item in items:
                if isinstance(item, TextDelta):
                    break
        agent = ctx.agents.get("left")
        assert agent is not None
        await agent.when_idle()
        end = agent.session.events[-1]
    assert end["type"] == "turn/end"
    assert end["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "parent"}}


async def test_cancelling_the_caller_cancels_the_turn() -> None:
    async with stack([{"text": "a long answer"}], replay={"delay_ms": 20}) as ctx:
        with anyio.move_on_after(0.05):
            await ctx.agents.run("go", session="moved")
        agent = ctx.agents.get("moved")
        assert agent is not None
        await agent.when_idle()
        assert agent.session.events[-1]["data"]["reason"]["reason"] == {"kind": "parent"}


async def test_an_agent_idle_without_turn_end_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    append = Session.append

    def failing(session: Session, event_type: str, data: Any, **options: Any) -> Any:
        if session.id == "broken" and event_type == "turn/end":
            raise OSError("disk full")  # the driver fails: the agent goes idle, no turn/end
        return append(session, event_type, data, **options)

    monkeypatch.setattr(Session, "append", failing)
    async with stack([{"text": "x"}]) as ctx:
        with pytest.raises(AgentError) as caught:
            await ctx.agents.run("hi", session="broken")
    assert caught.value.code == "TURN_NOT_ENDED"
    assert str(caught.value) == 'agent "broken" went idle without ending its turn (see agent/error)'
