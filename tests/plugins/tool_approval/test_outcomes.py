"""Every outcome of a question asked inline: what runs, what the log records (and when it is
durable), and the one result the model sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from approval_helpers import Recorder, call, of_type, result_texts, stack, tool, types

from framework import Context
from plugins.session.messages import derive_messages
from plugins.tool_approval import Answer, ApprovalRequest

pytestmark = pytest.mark.anyio

TWO_WRITES = [
    {"tool_calls": [call("c1", "write", {"path": "a"})]},
    {"tool_calls": [call("c2", "write", {"path": "b"})]},
    {"text": "done"},
]


async def run(ctx: Context, session_id: str = "s1", prompt: str = "go") -> Any:
    handle = await ctx.agents.create(session_id)
    handle.agent.followup(prompt)
    await handle.agent.when_idle()
    return handle.agent.session


def answering(*answers: Answer | None) -> tuple[list[ApprovalRequest], Any]:
    asked: list[ApprovalRequest] = []
    queue = list(answers)

    async def answerer(request: ApprovalRequest) -> Answer | None:
        asked.append(request)
        return queue.pop(0)

    return asked, answerer


async def test_allowed_once_runs_the_body_after_both_audit_events_are_durable(
    tmp_path: Path,
) -> None:
    seen: dict[str, list[str]] = {}

    async def write(args: Any, exec: Any) -> str:
        stored = await ctx.sessionPersistence.read_from("s1", 0)
        seen["body"] = [e["type"] for e in stored]
        return "written"

    async def answerer(request: ApprovalRequest) -> Answer:
        stored = await ctx.sessionPersistence.read_from("s1", 0)
        seen["answerer"] = [e["type"] for e in stored]
        assert request.arguments == {"path": "a"}
        assert request.tool_name == "write"
        assert request.call_id == "c1"
        assert request.reason == "the tool is not marked read-only"
        return Answer.once()

    async with stack(TWO_WRITES[::2], root=tmp_path, tools=[tool("write", write)]) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert seen["answerer"][-2:] == ["tool/call", "approval/asked"]
    assert seen["body"][-3:] == ["tool/call", "approval/asked", "approval/decided"]
    (asked,) = of_type(session, "approval/asked")
    assert list(asked) == ["id", "toolName", "callId", "reason"]
    assert asked["toolName"] == "write"
    assert asked["callId"] == "c1"
    assert of_type(session, "approval/decided") == [{"id": asked["id"], "outcome": "allowed-once"}]
    assert result_texts(session) == {"c1": "written"}
    assert of_type(session, "turn/end")[-1]["reason"] == {"kind": "completed"}


async def test_a_grant_is_for_one_call_id(tmp_path: Path) -> None:
    body = Recorder()
    asked, answerer = answering(Answer.once(), Answer.reject("only once"))
    async with stack(TWO_WRITES, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert [r.call_id for r in asked] == ["c1", "c2"]
    assert body.calls == [{"path": "a"}]
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == [
        "allowed-once",
        "rejected",
    ]
    assert result_texts(session)["c2"] == "Error: the user rejected this call: only once"


async def test_rejected_call_never_runs_and_the_model_sees_one_error_result() -> None:
    body = Recorder()
    _, answerer = answering(Answer.reject("use tmp/ instead"))
    async with stack(TWO_WRITES[::2], tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert body.calls == []
    (result,) = of_type(session, "tool/result")
    block = result["message"]["content"][0]
    assert block["isError"] is True
    assert block["content"] == [
        {"type": "text", "text": "Error: the user rejected this call: use tmp/ instead"}
    ]
    assert "error" not in result  # a denial carries no error info
    messages = derive_messages(session.events)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert not any("approval" in str(m["content"]) for m in messages[:2])


async def test_reject_without_reason() -> None:
    _, answerer = answering(Answer.reject())
    async with stack(TWO_WRITES[::2], tools=[tool("write", Recorder())]) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert result_texts(session) == {"c1": "Error: the user rejected this call"}


async def test_always_allows_the_tool_for_the_rest_of_the_session_only() -> None:
    body = Recorder()
    asked, answerer = answering(Answer.always(), Answer.reject("new session"), Answer.reject())
    async with stack(TWO_WRITES, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
        (always,) = [e for e in session.events if e["type"] == "approval/always"]
        assert always["ignorable"] is True
        assert list(always) == ["type", "seq", "time", "data", "ignorable"]
        assert always["data"] == {"id": asked[0].id, "toolName": "write"}
        assert [r.call_id for r in asked] == ["c1"]
        assert body.calls == [{"path": "a"}, {"path": "b"}]
        assert len(of_type(session, "approval/asked")) == 1
        other = await run(ctx, "s2")
    assert [r.call_id for r in asked] == ["c1", "c1", "c2"]
    assert result_texts(other)["c1"] == "Error: the user rejected this call: new session"


async def test_read_only_tools_and_allow_rules_run_without_asking() -> None:
    body = Recorder()
    asked, answerer = answering()
    script = [
        {"tool_calls": [call("c1", "look", {}), call("c2", "write", {"path": "tmp/x"})]},
        {"text": "done"},
    ]
    rules = {"rules": [{"tool": "write", "args": {"path": "tmp/*"}, "action": "allow"}]}
    tools = [tool("look", body, read_only=True), tool("write", body)]
    async with stack(script, approval=rules, tools=tools) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert asked == []
    assert len(body.calls) == 2
    assert "approval/asked" not in types(session)


async def test_deny_rule_refuses_without_a_question() -> None:
    body = Recorder()
    rules = {
        "rules": [
            {"tool": "write", "action": "deny"},
            {"tool": "look", "action": "deny", "reason": "not today"},
        ]
    }
    script = [{"tool_calls": [call("c1", "write"), call("c2", "look")]}, {"text": "done"}]
    tools = [tool("write", body), tool("look", body, read_only=True)]
    async with stack(script, approval=rules, tools=tools) as ctx:
        session = await run(ctx)
    assert body.calls == []
    assert "approval/asked" not in types(session)
    assert result_texts(session) == {
        "c1": 'Error: tool "write" is denied by the approval rules',
        "c2": "Error: not today",
    }


UNAVAILABLE = "Error: nobody could approve this call ({}); the call was not run"


async def test_no_answerer_is_unavailable_and_refused() -> None:
    body = Recorder()
    async with stack(TWO_WRITES[::2], tools=[tool("write", body)]) as ctx:
        session = await run(ctx)
    assert body.calls == []
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == ["unavailable"]
    assert result_texts(session) == {"c1": UNAVAILABLE.format("no approver is available")}


async def test_an_answerer_that_raises_or_passes_is_unavailable() -> None:
    async def broken(request: ApprovalRequest) -> Answer:
        raise RuntimeError("the approval UI crashed")

    async def passes(request: ApprovalRequest) -> None:
        return None

    body = Recorder()
    async with stack(TWO_WRITES, tools=[tool("write", body)]) as ctx:
        remove = ctx.approval.answer_with(broken)
        session = await run(ctx, prompt="one")
        remove()
        ctx.approval.answer_with(passes)
        again = await run(ctx, "s2", prompt="two")
    assert body.calls == []
    assert result_texts(session)["c1"] == UNAVAILABLE.format(
        "the approver failed: the approval UI crashed"
    )
    assert result_texts(again)["c1"] == UNAVAILABLE.format("no approver answered")
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == ["unavailable"] * 2


async def test_an_answer_past_timeout_ms_is_unavailable() -> None:
    async def slow(request: ApprovalRequest) -> Answer:
        await anyio.sleep(30)
        return Answer.once()

    body = Recorder()
    async with stack(
        TWO_WRITES[::2], approval={"timeout_ms": 50}, tools=[tool("write", body)]
    ) as ctx:
        ctx.approval.answer_with(slow)
        with anyio.fail_after(10):
            session = await run(ctx)
    assert body.calls == []
    assert result_texts(session) == {"c1": UNAVAILABLE.format("no answer within 50 ms")}


async def test_policy_never_refuses_without_asking() -> None:
    body = Recorder()
    asked, answerer = answering(Answer.once())
    async with stack(
        TWO_WRITES[::2], approval={"policy": "never"}, tools=[tool("write", body)]
    ) as ctx:
        ctx.approval.answer_with(answerer)
        session = await run(ctx)
    assert asked == []
    assert body.calls == []
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == ["rejected"]
    assert result_texts(session) == {
        "c1": 'Error: the approval policy is "never": this call needs approval and was refused '
        "without asking"
    }


async def test_the_last_policy_event_overrides_the_configured_default() -> None:
    body = Recorder()
    asked, answerer = answering(Answer.once())
    async with stack(TWO_WRITES, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer)
        handle = await ctx.agents.create("s1")
        session = handle.agent.session
        ctx.approval.set_policy(session, "never", source="test")
        assert ctx.approval.policy_of(session) == "never"
        ctx.approval.set_policy(session, "ask")
        ctx.approval.set_policy(session, "never")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        with pytest.raises(ValueError, match="sometimes"):
            ctx.approval.set_policy(session, "sometimes")  # type: ignore[arg-type]
    assert of_type(session, "approval/policy") == [
        {"policy": "never", "source": "test"},
        {"policy": "ask"},
        {"policy": "never"},
    ]
    assert asked == []
    assert body.calls == []


async def test_cancelling_the_turn_while_asking_cancels_the_question() -> None:
    body = Recorder()
    waiting = anyio.Event()

    async def hangs(request: ApprovalRequest) -> Answer:
        waiting.set()
        await anyio.sleep(30)
        return Answer.once()

    async with stack(TWO_WRITES[::2], tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(hangs)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        with anyio.fail_after(10):
            await waiting.wait()
            handle.agent.cancel()
            await handle.agent.when_idle()
        session = handle.agent.session
    assert body.calls == []
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == ["cancelled"]
    assert of_type(session, "tool/result")[0]["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert of_type(session, "turn/end")[-1]["reason"]["kind"] == "aborted"


async def test_answerers_are_owner_traced_and_asked_newest_first() -> None:
    body = Recorder()
    order: list[str] = []

    def answerer(label: str, answer: Answer | None) -> Any:
        async def answer_it(request: ApprovalRequest) -> Answer | None:
            order.append(label)
            return answer

        return answer_it

    async with stack(TWO_WRITES, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer("root", Answer.reject("root says no")))

        def ui(child: Context, _config: Any) -> None:
            child.approval.answer_with(answerer("ui-pass", None))
            child.approval.answer_with(answerer("ui", Answer.once()))

        fiber = ctx.plugin(ui, inject=["approval"])
        await fiber
        session = await run(ctx, prompt="one")
        await fiber.dispose()
        again = await run(ctx, "s2", prompt="two")
    assert order == ["ui", "ui", "root", "root"]
    assert result_texts(session)["c1"] == "done"
    assert result_texts(again)["c1"] == "Error: the user rejected this call: root says no"


async def test_a_call_without_an_agent_is_refused() -> None:
    from framework import AbortController
    from plugins.tools import ToolExecutionInput

    body = Recorder()
    async with stack(tools=[tool("write", body)]) as ctx:
        result = await ctx.tools.execute(
            ToolExecutionInput("c1", "write", {}, AbortController().signal)
        )
    assert body.calls == []
    assert result.content[0]["text"] == UNAVAILABLE.format(
        "this call needs approval, but it has no agent session to record the question in"
    )


async def test_without_the_plugin_an_ask_is_still_refused_as_before() -> None:
    from plugins.tools import Ask

    body = Recorder()
    async with stack(TWO_WRITES[::2], with_approval=False, tools=[tool("write", body)]) as ctx:

        async def ask(exec: Any, next: Any) -> Any:
            await next()
            return Ask()

        ctx.on("tools/pre-execute", ask)
        session = await run(ctx)
    assert body.calls == []
    assert result_texts(session) == {
        "c1": 'Error: tool "write" requires approval (not yet supported)'
    }


async def test_the_state_of_a_disposed_session_is_dropped() -> None:
    _, answerer = answering(Answer.once(), Answer.once())
    async with stack(TWO_WRITES, tools=[tool("write", Recorder())]) as ctx:
        ctx.approval.answer_with(answerer)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert "s1" in ctx.approval._books
        await handle.dispose()
        assert "s1" not in ctx.approval._books


async def test_policy_never_wins_over_a_remembered_always() -> None:
    body = Recorder()
    _, answerer = answering(Answer.always())
    script = [*TWO_WRITES, {"tool_calls": [call("c3", "write", {"path": "c"})]}, {"text": "ok"}]
    async with stack(script, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(answerer)
        handle = await ctx.agents.create("s1")
        session = handle.agent.session
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert len(body.calls) == 2
        ctx.approval.set_policy(session, "never")
        handle.agent.followup("again")
        await handle.agent.when_idle()
    assert len(body.calls) == 2
    assert [d["outcome"] for d in of_type(session, "approval/decided")] == [
        "allowed-once",
        "rejected",
    ]
    assert 'policy is "never"' in result_texts(session)["c3"]
