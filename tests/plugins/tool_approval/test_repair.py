"""The approval closer of crash repair: logs captured at the moment a process would die (an
answerer waiting, a continued call's body running) close with every open question `cancelled`,
calls that were never granted `TOOL_NOT_STARTED`, granted ones `TOOL_OUTCOME_UNKNOWN`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from approval_helpers import call, stack, tool

from plugins.session.messages import derive_messages
from plugins.session.repair import (
    TOOL_NOT_STARTED_ERROR,
    TOOL_OUTCOME_UNKNOWN_ERROR,
    interrupted_turn_closers,
)
from plugins.tool_approval import Answer, ApprovalRequest

pytestmark = pytest.mark.anyio

SCRIPT = [{"tool_calls": [call("c1", "write", {"path": "a"})]}, {"text": "done"}]


def shape(closers: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out = []
    for event in closers:
        data = event["data"]
        if event["type"] == "approval/decided":
            out.append((event["type"], data["outcome"]))
        elif event["type"] == "tool/result":
            out.append((event["type"], (data["message"]["source"]["callId"], data["error"])))
        else:
            out.append((event["type"], None))
    return out


async def test_a_question_pending_at_the_crash_is_cancelled_and_the_call_not_started() -> None:
    captured: list[list[dict[str, Any]]] = []

    async def dies(request: ApprovalRequest) -> Answer:
        captured.append(list(ctx.sessions.get("s1").events))
        return Answer.reject()

    async def write(args: Any, exec: Any) -> str:
        raise AssertionError("never runs")

    async with stack(SCRIPT, tools=[tool("write", write)]) as ctx:
        ctx.approval.answer_with(dies)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
    (log,) = captured
    assert [e["type"] for e in log[-2:]] == ["tool/call", "approval/asked"]
    closers = interrupted_turn_closers(log)
    asked = log[-1]["data"]["id"]
    assert closers[0]["data"] == {"id": asked, "outcome": "cancelled"}
    assert list(closers[0]) == ["type", "seq", "time", "data"]
    assert shape(closers) == [
        ("approval/decided", "cancelled"),
        ("tool/result", ("c1", TOOL_NOT_STARTED_ERROR)),
        ("step/end", None),
        ("turn/end", None),
    ]
    assert closers[1]["sourceEventSeqs"] == [log[-2]["seq"]]
    assert closers[0]["seq"] == log[-1]["seq"] + 1
    assert {e["time"] for e in closers} == {log[-1]["time"]}
    assert interrupted_turn_closers(log + closers) == []


async def test_a_granted_call_whose_body_was_running_has_an_unknown_outcome() -> None:
    captured: list[list[dict[str, Any]]] = []

    async def write(args: Any, exec: Any) -> str:
        captured.append(list(exec.agent.session.events))
        return "ok"

    async def yes(request: ApprovalRequest) -> Answer:
        return Answer.once()

    async with stack(SCRIPT, tools=[tool("write", write)]) as ctx:
        ctx.approval.answer_with(yes)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
    assert shape(interrupted_turn_closers(captured[0])) == [
        ("tool/result", ("c1", TOOL_OUTCOME_UNKNOWN_ERROR)),
        ("step/end", None),
        ("turn/end", None),
    ]


async def blocked(root: Path) -> None:
    async def later(request: ApprovalRequest) -> Answer:
        return Answer.later()

    async with stack(SCRIPT, root=root, tools=[tool("write", _never)]) as ctx:
        ctx.approval.answer_with(later)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        await handle.dispose()


async def _never(args: Any, exec: Any) -> str:
    raise AssertionError("never runs")


NOTE = {
    "role": "user",
    "content": [{"type": "text", "text": "answered"}],
    "source": {"kind": "plugin", "plugin": "tool-approval"},
}


async def test_a_crash_while_continuing_a_blocked_call(tmp_path: Path) -> None:
    await blocked(tmp_path)
    captured: dict[str, list[dict[str, Any]]] = {}

    async def write(args: Any, exec: Any) -> str:
        captured["body"] = list(exec.agent.session.events)
        return "ok"

    async def waiting(request: ApprovalRequest) -> Answer:
        captured["asking"] = list(ctx.sessions.get("s1").events)
        return Answer.once()

    async with stack([{"text": "after"}], root=tmp_path, tools=[tool("write", write)]) as ctx:
        ctx.approval.answer_with(waiting)
        handle = await ctx.agents.resume("s1")
        handle.agent.followup(NOTE)
        await handle.agent.when_idle()
        await handle.dispose()
    # Asked again in the continuing turn and killed before the answer: cancelled, not started.
    asking = interrupted_turn_closers(captured["asking"])
    assert shape(asking) == [
        ("approval/decided", "cancelled"),
        ("tool/result", ("c1", TOOL_NOT_STARTED_ERROR)),
        ("turn/end", None),
    ]
    # The result belongs to the call's own turn and step.
    assert (asking[1]["data"]["turn"], asking[1]["data"]["step"]) == (1, 1)
    # Killed while the granted body ran: the outcome is unknown.
    body = interrupted_turn_closers(captured["body"])
    assert shape(body) == [
        ("tool/result", ("c1", TOOL_OUTCOME_UNKNOWN_ERROR)),
        ("turn/end", None),
    ]
    for log, closers in ((captured["asking"], asking), (captured["body"], body)):
        repaired = log + closers
        assert interrupted_turn_closers(repaired) == []
        roles = [m["role"] for m in derive_messages(repaired)]
        assert roles == ["user", "assistant", "user"]


async def test_a_blocked_session_is_not_repaired(tmp_path: Path) -> None:
    await blocked(tmp_path)
    async with stack(root=tmp_path) as ctx:
        log = await ctx.sessionPersistence.load("s1")
    assert log.events[-1]["data"]["reason"] == {"kind": "blocked"}
    assert interrupted_turn_closers(log.events) == []
