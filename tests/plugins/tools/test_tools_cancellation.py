"""Truthful cancellation of a running tool body: the abort reaches the body at once, a body
still running after the grace is cut short, and the result says what really happened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

import plugins.tools as tools_plugin
from framework import AbortController, AbortError, ConfigError, Context
from plugins.tools import ToolExecution

pytestmark = pytest.mark.anyio

CUT_SHORT = {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}


@asynccontextmanager
async def root_with_grace(grace_ms: float | None) -> AsyncIterator[Context]:
    config = None if grace_ms is None else {"cancel_grace_ms": grace_ms}
    async with Context() as root:
        await root.plugin(tools_plugin, config)
        yield root


async def run_aborted_after(
    root: Any, call: Any, name: str, delay_s: float, controller: AbortController | None = None
) -> tuple[Any, float]:
    """Execute `name`, abort its caller after `delay_s`; the result and the time from the abort."""
    controller = controller or AbortController()
    box: list[Any] = []

    async def execute() -> None:
        box.append(await root.tools.execute(call(name, signal=controller.signal)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        await anyio.sleep(delay_s)
        aborted_at = anyio.current_time()
        controller.abort()
    return box[0], anyio.current_time() - aborted_at


async def test_the_abort_reaches_the_body_at_once(call: Any, make_tool: Any) -> None:
    seen: list[float] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        await exec.signal.wait()
        seen.append(anyio.current_time())
        return "stopped when asked"

    async with root_with_grace(60_000) as root:
        root.tools.register(make_tool("t", body))
        with anyio.fail_after(5):
            result, elapsed = await run_aborted_after(root, call, "t", 0.05)
    assert elapsed < 1
    assert result.is_error is False
    assert result.value == "stopped when asked"


async def test_a_body_outliving_the_grace_is_cut_short(call: Any, make_tool: Any) -> None:
    after_sleep: list[bool] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        await anyio.sleep(30)  # ignores exec.signal
        after_sleep.append(True)
        return "never"

    async with root_with_grace(200) as root:
        root.tools.register(make_tool("slow", body))
        with anyio.fail_after(10):
            result, elapsed = await run_aborted_after(root, call, "slow", 0.05)
    assert 0.15 <= elapsed < 3
    assert after_sleep == []
    assert result.error is not None
    assert result.error.info == CUT_SHORT
    assert "effects may have happened; verify before retrying" in result.error.message
    assert result.content[0]["text"].startswith("Error: tool call cut short")


async def test_the_default_grace_is_two_seconds() -> None:
    async with root_with_grace(None) as root:
        assert root.tools.scheduler.grace.grace_ms == 2000


async def test_a_body_finishing_within_the_grace_keeps_its_real_result(
    call: Any, make_tool: Any
) -> None:
    async def body(args: Any, exec: ToolExecution) -> dict[str, Any]:
        await exec.signal.wait()
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.1)  # finishing the effect after the abort
        return {"written": True}

    async with root_with_grace(5000) as root:
        root.tools.register(make_tool("t", body))
        with anyio.fail_after(5):
            result, _ = await run_aborted_after(root, call, "t", 0.02)
    assert result.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": '{"written":true}'}],
        "value": {"written": True},
    }


async def test_a_body_that_stops_at_the_abort_says_its_effects_may_have_happened(
    call: Any, make_tool: Any
) -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        await exec.signal.wait()
        exec.signal.throw_if_aborted()
        return "unreachable"

    async with root_with_grace(5000) as root:
        root.tools.register(make_tool("t", body))
        result, _ = await run_aborted_after(root, call, "t", 0.02)
    assert result.error is not None
    assert result.error.info == {"name": "AbortError", "code": "ABORTED"}
    assert result.error.message == (
        "tool call aborted while it ran: its effects may have happened; verify before retrying"
    )


async def test_zero_grace_cancels_at_the_abort(call: Any, make_tool: Any) -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        await anyio.sleep(30)
        return "never"

    async with root_with_grace(0) as root:
        root.tools.register(make_tool("slow", body))
        with anyio.fail_after(5):
            result, elapsed = await run_aborted_after(root, call, "slow", 0.02)
    assert elapsed < 1
    assert result.error.info == CUT_SHORT


async def test_skip_grace_cuts_only_aborted_bodies_of_the_given_agent(
    call: Any, make_tool: Any, agent_of: Any
) -> None:
    finished: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        try:
            await anyio.sleep(30)
        except BaseException:
            finished.append(f"{exec.call_id} cut")
            raise
        return "never"

    async def patient(args: Any, exec: ToolExecution) -> str:
        await anyio.sleep(0.3)
        finished.append(f"{exec.call_id} done")
        return "done"

    async with root_with_grace(60_000) as root:
        root.tools.register(make_tool("slow", body))
        root.tools.register(make_tool("patient", patient))
        a, b = agent_of(root), agent_of(root)
        ca, cb, live = AbortController(), AbortController(), AbortController()
        results: dict[str, Any] = {}

        async def execute(name: str, agent: Any, controller: AbortController, cid: str) -> None:
            results[cid] = await root.tools.execute(
                call(name, agent=agent, signal=controller.signal, call_id=cid)
            )

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(execute, "slow", a, ca, "a")
                tg.start_soon(execute, "slow", b, cb, "b")
                tg.start_soon(execute, "patient", a, live, "live")
                await anyio.sleep(0.05)
                assert root.tools.skip_grace() == 0  # nobody aborted: nothing to cut
                ca.abort()
                cb.abort()
                assert root.tools.skip_grace(a) == 1
                await anyio.sleep(0.05)
                assert finished == ["a cut"]
                assert root.tools.skip_grace() == 1
    assert sorted(finished) == ["a cut", "b cut", "live done"]
    assert results["a"].error.info == CUT_SHORT
    assert results["b"].error.info == CUT_SHORT
    assert results["live"].value == "done"


async def test_a_body_blocked_in_a_worker_thread_reports_what_it_did(
    call: Any, make_tool: Any
) -> None:
    """A worker thread cannot be interrupted: the body's real result stands when it returns."""

    async def body(args: Any, exec: ToolExecution) -> str:
        import time

        await anyio.to_thread.run_sync(time.sleep, 0.4)
        return "the thread finished"

    async with root_with_grace(50) as root:
        root.tools.register(make_tool("t", body))
        result, elapsed = await run_aborted_after(root, call, "t", 0.05)
    assert elapsed >= 0.3
    assert result.value == "the thread finished"


async def test_an_aborted_caller_before_dispatch_never_runs_the_body(
    call: Any, make_tool: Any
) -> None:
    ran: list[bool] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        ran.append(True)
        return "ran"

    async with root_with_grace(100) as root:
        root.tools.register(make_tool("t", body))
        controller = AbortController()
        controller.abort(AbortError())
        result = await root.tools.execute(call("t", signal=controller.signal))
    assert ran == []
    assert result.error.info == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}


@pytest.mark.parametrize("value", [-1, "soon", float("inf")])
async def test_cancel_grace_ms_is_validated(value: Any) -> None:
    async with Context() as root:
        with pytest.raises(ConfigError, match="cancel_grace_ms"):
            await root.plugin(tools_plugin, {"cancel_grace_ms": value})


async def test_a_body_failing_its_own_way_after_the_abort_keeps_its_error(
    call: Any, make_tool: Any
) -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        await exec.signal.wait()
        raise RuntimeError("stopped before sending the request")

    async with root_with_grace(5000) as root:
        root.tools.register(make_tool("t", body))
        result, _ = await run_aborted_after(root, call, "t", 0.02)
    assert result.to_json() == {
        "isError": True,
        "content": [{"type": "text", "text": "Error: stopped before sending the request"}],
        "error": {"message": "stopped before sending the request"},
    }
