"""A resumed replay session never repeats a call id: the replay model continues where the
session is, and the loop refuses a response that reuses a call id of the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_helpers import call, stack, tool

pytestmark = pytest.mark.anyio

SCRIPT = [
    {"tool_calls": [call("c1", "note", {"n": 1})]},
    {"text": "first turn done"},
    {"tool_calls": [call("c2", "note", {"n": 2})]},
    {"text": "second turn done"},
]


async def note(args: Any, exec: Any) -> Any:
    return args["n"]


def call_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["callId"] for e in events if e["type"] == "tool/call"]


def ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


async def first_turn(root: Path) -> None:
    async with stack(SCRIPT, root=root) as ctx:
        ctx.tools.register(tool("note", note))
        handle = await ctx.agents.create("s")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        await handle.dispose()


async def test_a_new_process_continues_the_script_where_the_session_is(tmp_path: Path) -> None:
    await first_turn(tmp_path)
    # A fresh stack is a fresh adapter: its in-memory cursor knows nothing of "s".
    async with stack(SCRIPT, root=tmp_path) as ctx:
        ctx.tools.register(tool("note", note))
        handle = await ctx.agents.resume("s")
        agent = handle.agent
        agent.followup("continue")
        await agent.when_idle()
        events = agent.session.events
        await handle.dispose()
    assert call_ids(events) == ["c1", "c2"]
    assert ends(events) == [{"kind": "completed"}, {"kind": "completed"}]
    texts = [
        e["data"]["message"]["content"][0].get("text")
        for e in events
        if e["type"] == "assistant/message"
    ]
    assert texts == [None, "first turn done", None, "second turn done"]


async def test_a_different_script_starts_at_its_first_response(tmp_path: Path) -> None:
    await first_turn(tmp_path)
    fresh = [{"text": "a new script for the continuation"}]
    async with stack(fresh, root=tmp_path) as ctx:
        handle = await ctx.agents.resume("s")
        agent = handle.agent
        agent.followup("continue")
        await agent.when_idle()
        last = agent.session.events[-1]
        said = [e for e in agent.session.events if e["type"] == "assistant/message"][-1]
        await handle.dispose()
    assert last["data"]["reason"] == {"kind": "completed"}
    assert said["data"]["message"]["content"] == [
        {"type": "text", "text": "a new script for the continuation"}
    ]


async def test_a_reused_call_id_is_refused_before_it_enters_the_transcript(
    tmp_path: Path,
) -> None:
    await first_turn(tmp_path)
    ran: list[int] = []

    async def counting(args: Any, exec: Any) -> Any:
        ran.append(args["n"])
        return args["n"]

    reusing = [{"tool_calls": [call("c1", "note", {"n": 9})]}]
    async with stack(reusing, root=tmp_path) as ctx:
        ctx.tools.register(tool("note", counting))
        handle = await ctx.agents.resume("s")
        agent = handle.agent
        before = len(agent.session.events)
        agent.followup("continue")
        await agent.when_idle()
        new = agent.session.events[before:]
        await handle.dispose()
    assert ran == []
    assert [e["type"] for e in new if e["type"] in ("assistant/message", "tool/call")] == []
    assert new[-1]["data"]["reason"] == {
        "kind": "error",
        "error": {
            "message": 'the model reused tool call id "c1", already used in this session; '
            "the response was refused and its tool calls were not run",
            "code": "DUPLICATE_TOOL_CALL_ID",
        },
    }


async def test_a_call_id_repeated_within_one_response_is_refused() -> None:
    twice = [{"tool_calls": [call("same", "note", {"n": 1}), call("same", "note", {"n": 2})]}]
    async with stack(twice) as ctx:
        ctx.tools.register(tool("note", note))
        handle = await ctx.agents.create("twice")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        events = handle.agent.session.events
        await handle.dispose()
    assert call_ids(events) == []
    reason = events[-1]["data"]["reason"]
    assert reason["error"]["code"] == "DUPLICATE_TOOL_CALL_ID"
    assert "already used in this response" in reason["error"]["message"]
