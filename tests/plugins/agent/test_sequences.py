"""The exact event sequences of docs/agent-loop.md for a replayed conversation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from itertools import groupby
from typing import Any

import anyio
import pytest
from agent_helpers import call, stack, tool, types

from plugins.session.repair import interrupted_turn_closers

pytestmark = pytest.mark.anyio

PREFIX = [
    "agent/inbox/spliced",
    "turn/start",
    "agent/inbox/spliced",
    "step/start",
    "user/message",
    "request/header",
    "request/context",
]


def collapsed(names: list[str]) -> list[str]:
    """Runs of `assistant/chunk` collapsed to one entry."""
    return [name for name, _ in groupby(names)]


async def test_a_crash_before_the_model_answers() -> None:
    reached = anyio.Event()

    def hang(options: Any, next: Callable[[], Any]) -> AsyncIterator[Any]:
        async def stream() -> AsyncIterator[Any]:
            reached.set()
            await anyio.sleep_forever()
            yield {}  # pragma: no cover

        return stream()

    async with stack([{"text": "never"}]) as ctx:
        ctx.on("llm/stream", hang)
        handle = await ctx.agents.create("seq-a")
        agent = handle.agent
        agent.followup("hello")
        await reached.wait()
        events = list(agent.session.events)
        assert types(agent.session) == PREFIX
        assert events[5]["data"]["reason"] == "initial"
        closers = interrupted_turn_closers(events)
        assert [e["type"] for e in closers] == ["step/end", "turn/end"]
        assert closers[-1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
        await handle.dispose()


async def test_b_tool_step_then_final_answer() -> None:
    async def echo(args: Any, exec: Any) -> Any:
        return args

    script = [{"tool_calls": [call("c1", "echo", {"x": 1})]}, {"text": "done"}]
    async with stack(script) as ctx:
        ctx.tools.register(tool("echo", echo))
        handle = await ctx.agents.create("seq-b")
        agent = handle.agent
        agent.followup("use the tool")
        await agent.when_idle()
        names = types(agent.session)
        assert collapsed(names) == [
            *PREFIX,
            "assistant/chunk",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/chunk",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        events = agent.session.events
        finishes = [
            e["data"]["chunk"]["reason"]["kind"]
            for e in events
            if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "finish"
        ]
        assert finishes == ["tool-calls", "stop"]
        assert names.count("request/header") == 1
        call_event = next(e for e in events if e["type"] == "tool/call")
        assert call_event["data"] == {
            "turn": 1,
            "step": 1,
            "callId": "c1",
            "name": "echo",
            "arguments": '{"x":1}',
        }
        result = next(e for e in events if e["type"] == "tool/result")
        assert result["sourceEventSeqs"] == [call_event["seq"]]
        assert result["surfaceOp"] == "append"
        assert result["data"]["message"]["content"][0] == {
            "type": "tool-result",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": '{"x":1}'}],
            "isError": False,
        }
        messages = [e for e in events if e["type"] == "assistant/message"]
        for message in messages:
            chunk_seqs = [
                e["seq"]
                for e in events
                if e["type"] == "assistant/chunk" and e["data"]["step"] == message["data"]["step"]
            ]
            assert message["sourceEventSeqs"] == chunk_seqs
            source = dict(message["data"]["message"]["source"])
            # The replay model's position, so a resumed session continues the script.
            state = source.pop("replayState")
            assert state["next"] == message["data"]["step"]
            assert source == {"kind": "model", "provider": "replay", "model": "replay-1"}
        assert messages[-1]["data"]["message"]["content"] == [{"type": "text", "text": "done"}]
        assert events[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
        assert interrupted_turn_closers(events) == []
        await handle.dispose()
