"""dsh-mcp in the agent loop: the `mcp/tools` record, failures as results, a durable reload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import agent_stack, call, starts, toy

from plugins.mcp import EVENT_TYPE, IDEMPOTENCY_META_KEY
from plugins.session.messages import derive_messages
from plugins.tools.execution import idempotency_key

pytestmark = pytest.mark.anyio

SCRIPT: list[Any] = [
    {
        "tool_calls": [
            call("e1", "mcp__toy__echo", {"text": "one"}),
            call("e2", "mcp__toy__echo", {"text": "two"}),
            call("m1", "mcp__toy__meta"),
        ]
    },
    {"tool_calls": [call("c1", "mcp__toy__crash")]},
    {"tool_calls": [call("e3", "mcp__toy__echo", {"text": "three"})]},
    {"text": "done with turn one"},
    {"tool_calls": [call("e4", "mcp__toy__lookup", {"key": "k"})]},
    {"text": "done with turn two"},
]


def seq_of(events: list[dict[str, Any]], kind: str, call_id: str) -> int:
    for event in events:
        data = event["data"]
        if event["type"] == kind and call_id in (
            data.get("callId"),
            data.get("message", {}).get("source", {}).get("callId"),
        ):
            return int(event["seq"])
    raise AssertionError(f"no {kind} for {call_id}")


async def test_tool_lists_are_recorded_per_turn_and_failures_stay_results(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    async with agent_stack(SCRIPT, {"toy": toy(tmp_path)}, root=sessions) as ctx:
        handle = await ctx.agents.create("mcp-agent", meta={"cwd": str(tmp_path)})
        agent = handle.agent
        agent.followup("use the toy server")
        await agent.when_idle()
        agent.followup("and once more")
        await agent.when_idle()
        live = [dict(event) for event in agent.session.events]
        store = await ctx.sessions.identity()
        await handle.dispose()

    records = [event for event in live if event["type"] == EVENT_TYPE]
    # Turn 1: first use (e1), then again after the crash restarted the server (e3); turn 2: e4.
    assert [(r["data"]["turn"], r["data"]["server"]) for r in records] == [
        (1, "toy"),
        (1, "toy"),
        (2, "toy"),
    ]
    for record, call_id in zip(records, ["e1", "e3", "e4"], strict=True):
        assert record["ignorable"] is True
        assert seq_of(live, "tool/call", call_id) < record["seq"]
        assert record["seq"] < seq_of(live, "tool/result", call_id)
        assert record["data"]["serverInfo"] == {"name": "toy", "version": "1.2.3"}
        names = [tool["name"] for tool in record["data"]["tools"]]
        assert {"echo", "crash"} <= set(names)
        echo = next(tool for tool in record["data"]["tools"] if tool["name"] == "echo")
        assert echo["inputSchema"]["required"] == ["text"]

    ends = [event["data"]["reason"] for event in live if event["type"] == "turn/end"]
    assert ends == [{"kind": "completed"}, {"kind": "completed"}]
    results = {
        m["source"]["callId"]: m["content"][0]
        for m in derive_messages(live)
        if m["source"]["kind"] == "tool"
    }
    assert results["e2"]["content"] == [{"type": "text", "text": "two"}]
    assert results["c1"]["isError"] is True
    assert "the effect may have happened" in results["c1"]["content"][0]["text"]
    assert results["e3"]["content"] == [{"type": "text", "text": "three"}]
    # The server received the durable call's key, derived from the store, session and call id.
    key = idempotency_key(store, "mcp-agent", "m1")
    assert json.loads(results["m1"]["content"][0]["text"]) == {IDEMPOTENCY_META_KEY: key}

    # The ignorable events are durable and load back as written.
    async with agent_stack([], {}, root=sessions) as ctx:
        loaded = (await ctx.sessionPersistence.load("mcp-agent")).events
    assert loaded == live


async def test_a_server_that_cannot_restart_is_tried_once_per_call(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [call("c1", "mcp__toy__crash")]},
        {"tool_calls": [call("e1", "mcp__toy__echo", {"text": "x"})]},
        {"text": "the server is gone"},
    ]
    async with agent_stack(script, {"toy": toy(tmp_path)}) as ctx:
        (tmp_path / "refuse").touch()  # read at start-up only: the running server is fine
        handle = await ctx.agents.create("mcp-down", meta={"cwd": str(tmp_path)})
        handle.agent.followup("go")
        await handle.agent.when_idle()
        events = list(handle.agent.session.events)
        await handle.dispose()
    assert len(starts(tmp_path)) == 2  # the first start, then one refused restart for e1
    results = {
        m["source"]["callId"]: m["content"][0]
        for m in derive_messages(events)
        if m["source"]["kind"] == "tool"
    }
    assert "the call was not sent, so it had no effect" in results["e1"]["content"][0]["text"]
    # Only the first use in the turn was recorded: the refused restart listed nothing.
    assert [e["data"]["turn"] for e in events if e["type"] == EVENT_TYPE] == [1]
    assert events[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
