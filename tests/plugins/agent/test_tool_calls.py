"""Tool calls of one response: pool, model order, exclusivity, abort, contexts."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from agent_helpers import call, stack, tool, types

from plugins.llm import HarnessError

pytestmark = pytest.mark.anyio


def results(session: Any) -> list[dict[str, Any]]:
    return [e for e in session.events if e["type"] == "tool/result"]


def calls(session: Any) -> dict[str, dict[str, Any]]:
    return {e["data"]["callId"]: e for e in session.events if e["type"] == "tool/call"}


async def test_twelve_parallel_calls_run_at_most_ten_at_a_time_and_commit_in_model_order() -> None:
    active = 0
    peak = 0
    gate = anyio.Event()
    finished: list[int] = []

    async def slow(args: Any, exec: Any) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if active == 10:
            gate.set()
        await gate.wait()
        # Later calls finish first: commit order must not follow completion order.
        await anyio.sleep((12 - args["i"]) * 0.002)
        active -= 1
        finished.append(args["i"])
        return f"r{args['i']}"

    script = [
        {"tool_calls": [call(f"c{i}", "slow", {"i": i}) for i in range(12)]},
        {"text": "ok"},
    ]
    async with stack(script) as ctx:
        ctx.tools.register(tool("slow", slow, parallel=True))
        handle = await ctx.agents.create("pool")
        agent = handle.agent
        agent.followup("go")
        await agent.when_idle()
        assert peak == 10
        assert finished != sorted(finished)
        committed = results(agent.session)
        assert [r["data"]["message"]["source"]["callId"] for r in committed] == [
            f"c{i}" for i in range(12)
        ]
        started = calls(agent.session)
        for r in committed:
            call_id = r["data"]["message"]["source"]["callId"]
            assert r["sourceEventSeqs"] == [started[call_id]["seq"]]
            text = r["data"]["message"]["content"][0]["content"][0]["text"]
            assert text == f"r{call_id[1:]}"
        assert agent.session.events[-1]["data"]["reason"] == {"kind": "completed"}
        await handle.dispose()


async def test_an_exclusive_call_splits_parallel_runs() -> None:
    timeline: list[str] = []

    async def par(args: Any, exec: Any) -> Any:
        timeline.append(f"start {args['n']}")
        await anyio.sleep(0.005)
        timeline.append(f"end {args['n']}")
        return None

    async def excl(args: Any, exec: Any) -> Any:
        timeline.append("start x")
        await anyio.sleep(0.001)
        timeline.append("end x")
        return None

    script = [
        {
            "tool_calls": [
                call("a", "par", {"n": "a"}),
                call("b", "par", {"n": "b"}),
                call("x", "excl"),
                call("c", "par", {"n": "c"}),
            ]
        },
        {"text": "ok"},
    ]
    async with stack(script, agent={"max_parallel_tool_calls": 4}) as ctx:
        ctx.tools.register(tool("par", par, parallel=True))
        ctx.tools.register(tool("excl", excl))
        handle = await ctx.agents.create("groups")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert timeline[:2] == ["start a", "start b"]
        assert timeline[2:] == ["end a", "end b", "start x", "end x", "start c", "end c"] or (
            sorted(timeline[2:4]) == ["end a", "end b"]
            and timeline[4:] == ["start x", "end x", "start c", "end c"]
        )
        names = [e["type"] for e in handle.agent.session.events if e["type"].startswith("tool/")]
        # Parallel calls start (tool/call + prepare) before any of them commits.
        assert (
            names
            == ["tool/call", "tool/call", "tool/result", "tool/result"]
            + [
                "tool/call",
                "tool/result",
            ]
            * 2
        )
        await handle.dispose()


async def test_abort_mid_step_synthesizes_pairs_for_unstarted_calls() -> None:
    holder: dict[str, Any] = {}

    async def first(args: Any, exec: Any) -> Any:
        holder["agent"].cancel()
        return "ran"

    async def never(args: Any, exec: Any) -> Any:
        raise AssertionError("must not run")

    script = [{"tool_calls": [call("a", "first"), call("b", "never"), call("c", "never")]}]
    async with stack(script) as ctx:
        ctx.tools.register(tool("first", first))
        ctx.tools.register(tool("never", never))
        handle = await ctx.agents.create("abort")
        agent = holder["agent"] = handle.agent
        agent.followup("go")
        await agent.when_idle()
        names = types(agent.session)
        tail = names[names.index("assistant/message") :]
        assert tail == [
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
        ]
        committed = results(agent.session)
        # "first" finished after the abort: its real result is committed (its effect happened).
        assert "error" not in committed[0]["data"]
        assert committed[0]["data"]["message"]["content"][0]["isError"] is False
        started = calls(agent.session)
        for r, call_id in zip(committed[1:], ["b", "c"], strict=True):
            assert r["data"]["error"] == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
            block = r["data"]["message"]["content"][0]
            assert block["toolCallId"] == call_id
            assert block["isError"] is True
            assert block["content"] == [
                {"type": "text", "text": "Error: tool call aborted before dispatch"}
            ]
            assert r["sourceEventSeqs"] == [started[call_id]["seq"]]
        assert started["b"]["data"]["arguments"] == "{}"
        assert agent.session.events[-1]["data"] == {
            "turn": 1,
            "reason": {"kind": "aborted", "reason": {"kind": "user"}},
        }
        await handle.dispose()


async def test_abort_during_parallel_dispatch_drains_started_calls() -> None:
    started = 0
    gate = anyio.Event()
    holder: dict[str, Any] = {}

    async def body(args: Any, exec: Any) -> Any:
        nonlocal started
        started += 1
        if started == 2:
            holder["agent"].cancel()
        await exec.signal.wait()
        return "late"

    script = [{"tool_calls": [call(f"p{i}", "wait", {"i": i}) for i in range(4)]}]
    async with stack(script, agent={"max_parallel_tool_calls": 2}) as ctx:
        ctx.tools.register(tool("wait", body, parallel=True))
        handle = await ctx.agents.create("drain")
        agent = holder["agent"] = handle.agent
        agent.followup("go")
        await agent.when_idle()
        gate.set()
        codes = [r["data"].get("error", {}).get("code") for r in results(agent.session)]
        # The two started bodies returned after the abort: their real results are committed.
        assert codes == [None, None, "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
        assert started == 2
        assert agent.session.events[-1]["data"]["reason"]["kind"] == "aborted"
        await handle.dispose()


async def test_tool_errors_and_contexts_and_concluding_results() -> None:
    class Broken(HarnessError):
        pass

    async def boom(args: Any, exec: Any) -> Any:
        raise RuntimeError("boom")

    async def typed(args: Any, exec: Any) -> Any:
        raise Broken("typed failure", "BROKEN")

    async def noting(args: Any, exec: Any) -> Any:
        exec.defer_context("remember this")
        return "noted"

    async def stopper(args: Any, exec: Any) -> Any:
        exec.conclude_turn()
        return "stop here"

    script = [
        {"tool_calls": [call("e1", "boom"), call("e2", "typed"), call("n", "noting")]},
        {"tool_calls": [call("s", "stopper")]},
    ]
    async with stack(script) as ctx:
        for name, body in [("boom", boom), ("typed", typed), ("noting", noting)]:
            ctx.tools.register(tool(name, body))
        ctx.tools.register(tool("stopper", stopper))
        handle = await ctx.agents.create("errors")
        agent = handle.agent
        agent.followup("go")
        await agent.when_idle()
        committed = results(agent.session)
        first = committed[0]["data"]
        assert "error" not in first
        assert first["message"]["content"][0]["content"] == [
            {"type": "text", "text": "Error: boom"}
        ]
        assert committed[1]["data"]["error"] == {"name": "Broken", "code": "BROKEN"}
        names = types(agent.session)
        third = [i for i, name in enumerate(names) if name == "tool/result"][2]
        assert names[third : third + 5] == [
            "tool/result",
            "agent/inbox/spliced",
            "step/end",
            "agent/inbox/spliced",
            "step/start",
        ]
        splice = agent.session.events[third + 1]["data"]
        assert splice["target"] == "next-step"
        assert splice["inserted"][0]["content"] == [{"type": "text", "text": "remember this"}]
        assert agent.session.events[third + 3]["data"] == {
            "target": "next-step",
            "start": 0,
            "removedCount": 1,
            "inserted": [],
        }
        assert agent.session.events[third + 5]["type"] == "user/message"
        # The concluding result ends the turn without a third request.
        assert names[-3:] == ["tool/result", "step/end", "turn/end"]
        assert agent.session.events[-1]["data"]["reason"] == {"kind": "completed"}
        await handle.dispose()


async def test_timeout_policy_result_is_committed() -> None:
    async def stuck(args: Any, exec: Any) -> Any:
        await exec.signal.wait()
        return "too late"

    script = [{"tool_calls": [call("t", "stuck")]}, {"text": "ok"}]
    async with stack(script, timeout_policy=True) as ctx:
        ctx.tools.register(tool("stuck", stuck, timeout_ms=20))
        handle = await ctx.agents.create("timeout")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        (result,) = results(handle.agent.session)
        assert result["data"]["error"] == {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}
        assert result["data"]["message"]["content"][0]["content"] == [
            {"type": "text", "text": "Error: tool call timed out after 20ms"}
        ]
        await handle.dispose()


async def test_cancel_cuts_a_stubborn_body_short_after_the_grace() -> None:
    holder: dict[str, Any] = {}
    reached: list[str] = []

    async def stubborn(args: Any, exec: Any) -> Any:
        holder["agent"].cancel()
        await anyio.sleep(30)  # ignores exec.signal
        reached.append("after the sleep")
        return "never"

    script = [{"tool_calls": [call("s1", "stubborn")]}, {"text": "unreachable"}]
    async with stack(script, tools={"cancel_grace_ms": 100}) as ctx:
        ctx.tools.register(tool("stubborn", stubborn))
        handle = await ctx.agents.create("grace")
        agent = holder["agent"] = handle.agent
        with anyio.fail_after(5):
            agent.followup("go")
            await agent.when_idle()
        (result,) = results(agent.session)
        await handle.dispose()
    assert reached == []
    assert result["data"]["error"] == {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}
    assert agent.session.events[-1]["data"]["reason"] == {
        "kind": "aborted",
        "reason": {"kind": "user"},
    }


async def test_a_lone_call_runs_in_the_steps_task_and_a_pool_in_child_tasks() -> None:
    """A group of one call needs no pool: it runs in the driver's own task (no task spawns per
    tool step); calls run as a parallel group each get a task of the pool."""
    from plugins.agent.hooks import PRE_STEP

    step_tasks: list[int] = []
    body_tasks: dict[str, int] = {}

    def pre_step(payload: Any, next: Any) -> Any:
        step_tasks.append(anyio.get_current_task().id)
        return next()

    async def body(args: Any, exec: Any) -> Any:
        body_tasks[exec.call_id] = anyio.get_current_task().id
        return "ok"

    script = [
        {"tool_calls": [call("alone", "exclusive")]},
        {"tool_calls": [call("p1", "parallel"), call("p2", "parallel")]},
        {"text": "done"},
    ]
    async with stack(script) as ctx:
        ctx.tools.register(tool("exclusive", body))
        ctx.tools.register(tool("parallel", body, parallel=True))
        ctx.on(PRE_STEP, pre_step)
        handle = await ctx.agents.create("lone")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        committed = results(handle.agent.session)
        assert [r["data"]["message"]["source"]["callId"] for r in committed] == [
            "alone",
            "p1",
            "p2",
        ]
        assert len(set(step_tasks)) == 1
        assert body_tasks["alone"] == step_tasks[0]
        assert step_tasks[0] not in (body_tasks["p1"], body_tasks["p2"])
        await handle.dispose()
