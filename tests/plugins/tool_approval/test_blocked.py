"""A question left open (`Answer.later()`): the turn ends `blocked`, nothing runs and no model
request is made; a later process answers and the call runs once, with one `tool/result`, before
the model's next step."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from approval_helpers import Recorder, call, of_type, result_texts, stack, tool, types

from plugins.session.messages import derive_messages
from plugins.tool_approval import Answer, ApprovalRequest, pending_questions

pytestmark = pytest.mark.anyio

SCRIPT = [
    {
        "tool_calls": [
            call("c1", "write", {"path": "a"}),
            call("c2", "look", {}),
            call("c3", "write", {"path": "b"}),
        ]
    },
    {"text": "first done"},
]
NOTE = {
    "role": "user",
    "content": [{"type": "text", "text": "answered"}],
    "source": {"kind": "plugin", "plugin": "tool-approval"},
}


async def later(request: ApprovalRequest) -> Answer:
    return Answer.later()


def tools(write: Recorder, look: Recorder) -> list[Any]:
    return [tool("write", write), tool("look", look, read_only=True)]


async def block(root: Path, write: Recorder, look: Recorder) -> list[dict[str, Any]]:
    async with stack(SCRIPT, root=root, tools=tools(write, look)) as ctx:
        ctx.approval.answer_with(later)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        session = handle.agent.session
        assert [q.call_id for q in ctx.approval.pending(session)] == ["c1", "c3"]
        await handle.dispose()
        return list(await ctx.sessionPersistence.read_from("s1", 0))


async def answer(root: Path, write: Recorder, look: Recorder, **answers: Answer) -> Any:
    async with stack([{"text": "after the answer"}], root=root, tools=tools(write, look)) as ctx:
        ctx.approval.answer_with(later)
        handle = await ctx.agents.resume("s1")
        for call_id, given in answers.items():
            ctx.approval.answer("s1", call_id, given)
        handle.agent.followup(NOTE)
        await handle.agent.when_idle()
        await handle.dispose()
        return handle.agent.session


async def test_an_open_question_blocks_the_turn_with_nothing_run(tmp_path: Path) -> None:
    write, look = Recorder(), Recorder()
    stored = await block(tmp_path, write, look)
    assert write.calls == []
    assert look.calls == [{}]  # allowed calls of the same response are not held back
    tail = [e["type"] for e in stored][-9:]
    assert tail == [
        "assistant/message",
        "tool/call",
        "approval/asked",
        "tool/call",
        "tool/result",
        "tool/call",
        "approval/asked",
        "step/end",
        "turn/end",
    ]
    assert stored[-1]["data"]["reason"] == {"kind": "blocked"}
    assert "approval/decided" not in [e["type"] for e in stored]
    assert [q.call_id for q in pending_questions(stored)] == ["c1", "c3"]
    # One model request only: the open questions stop the turn at the next step boundary.
    assert [e["type"] for e in stored].count("assistant/message") == 1


async def test_a_later_answer_runs_the_call_once_and_balances_the_transcript(
    tmp_path: Path,
) -> None:
    write, look = Recorder("written"), Recorder()
    await block(tmp_path, write, look)
    session = await answer(tmp_path, write, look, c1=Answer.once(), c3=Answer.reject("not b"))
    assert write.calls == [{"path": "a"}]
    assert result_texts(session) == {
        "c1": "written",
        "c2": "done",
        "c3": "Error: the user rejected this call: not b",
    }
    calls = Counter(d["callId"] for d in of_type(session, "tool/call"))
    results = Counter(d["message"]["source"]["callId"] for d in of_type(session, "tool/result"))
    assert calls == results == {"c1": 1, "c2": 1, "c3": 1}
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == [
        "allowed-once",
        "rejected",
    ]
    # The decisions sit inside the continuing turn, before its first step.
    second = types(session)[types(session).index("turn/start", 20) :]
    assert second[:7] == [
        "turn/start",
        "agent/inbox/spliced",
        "approval/decided",
        "tool/result",
        "approval/decided",
        "tool/result",
        "step/start",
    ]
    messages = derive_messages(session.events)
    assert [(m["role"], [b["type"] for b in m["content"]]) for m in messages] == [
        ("user", ["text"]),
        ("assistant", ["tool-call", "tool-call", "tool-call"]),
        ("user", ["tool-result"]),
        ("user", ["tool-result"]),
        ("user", ["tool-result"]),
        ("user", ["text"]),
        ("assistant", ["text"]),
    ]
    assert messages[5]["source"] == {"kind": "plugin", "plugin": "tool-approval"}
    assert of_type(session, "turn/end")[-1]["reason"] == {"kind": "completed"}
    assert pending_questions(session.events) == []


async def test_answering_one_of_two_keeps_the_session_blocked(tmp_path: Path) -> None:
    write, look = Recorder(), Recorder()
    await block(tmp_path, write, look)
    session = await answer(tmp_path, write, look, c3=Answer.always())
    assert write.calls == [{"path": "b"}]
    assert [q.call_id for q in pending_questions(session.events)] == ["c1"]
    assert of_type(session, "turn/end")[-1]["reason"] == {"kind": "blocked"}
    assert types(session).count("assistant/message") == 1  # still no model request
    assert "approval/always" in types(session)
    # The remembered "always" answers the remaining question of the same tool.
    session = await answer(tmp_path, write, look)
    assert write.calls == [{"path": "b"}, {"path": "a"}]
    assert pending_questions(session.events) == []
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == ["allowed-once"] * 2
    assert of_type(session, "turn/end")[-1]["reason"] == {"kind": "completed"}


async def test_the_continued_call_keeps_its_idempotency_key(tmp_path: Path) -> None:
    from plugins.tools import idempotency_key

    keys: list[str] = []

    async def write(args: Any, exec: Any) -> str:
        keys.append(exec.idempotency_key)
        return "ok"

    await block(tmp_path, Recorder(), Recorder())
    async with stack([{"text": "after"}], root=tmp_path, tools=[tool("write", write)]) as ctx:
        handle = await ctx.agents.resume("s1")
        ctx.approval.answer("s1", "c1", Answer.once())
        ctx.approval.answer("s1", "c3", Answer.once())
        handle.agent.followup(NOTE)
        await handle.agent.when_idle()
        store = await ctx.sessions.identity()
        await handle.dispose()
    assert keys == [idempotency_key(store, "s1", "c1"), idempotency_key(store, "s1", "c3")]
