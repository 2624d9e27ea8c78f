"""The tool timeout policy: exact TOOL_TIMEOUT result, JS ms text, body awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import plugins.tool_timeout_policy as timeout_policy
import plugins.tools as tools_plugin
from framework import AbortController, AbortSignal, Context, Fiber, Scope
from plugins.tools import Tool, ToolExecution, ToolExecutionInput

pytestmark = pytest.mark.anyio


def timed_out(ms: str) -> dict[str, Any]:
    message = f"tool call timed out after {ms}ms"
    return {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {message}"}],
        "error": {"message": message, "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}},
    }


@asynccontextmanager
async def policy_root() -> AsyncIterator[tuple[Context, Fiber]]:
    async with Context() as root:
        await root.plugin(tools_plugin)
        fiber = root.plugin(timeout_policy)
        await fiber
        yield root, fiber


def tool(name: str, body: Callable[[Any, ToolExecution], Awaitable[Any]], **fields: Any) -> Tool:
    return Tool(name=name, description=name, parameters={}, execute=body, **fields)


def call(name: str, signal: AbortSignal | None = None, agent: Any = None) -> ToolExecutionInput:
    return ToolExecutionInput(
        "call-1", name, {}, AbortController().signal if signal is None else signal, agent=agent
    )


def test_plugin_shape() -> None:
    assert timeout_policy.name == "tool-timeout-policy"
    assert timeout_policy.inject == ["tools"]


@pytest.mark.parametrize(
    ("ms", "text"),
    [(5000, "5000"), (5000.0, "5000"), (0.5, "0.5"), (1e21, "1e+21"), (2.5e-7, "2.5e-7")],
)
def test_ms_prints_like_javascript(ms: float, text: str) -> None:
    assert timeout_policy.timeout_result(ms).to_json() == timed_out(text)


async def test_deadline_fires_and_the_body_is_still_awaited() -> None:
    order: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        order.append("body:start")
        await exec.signal.wait()
        order.append("body:saw-abort")
        await anyio.lowlevel.checkpoint()
        order.append("body:end")
        return "late"

    async with policy_root() as (root, _):
        caller = AbortController()
        signals: list[AbortSignal] = []

        async def post(exec: ToolExecution, result: Any, next: Callable[[], Any]) -> Any:
            signals.append(exec.signal)
            return await next()

        root.on("tools/post-execute", post)
        root.tools.register(tool("slow", body, timeout_ms=20.5))  # room for the body to start first
        with anyio.fail_after(5):
            result = await root.tools.execute(call("slow", caller.signal))
    assert result.to_json() == timed_out("20.5")  # a fraction prints as JavaScript does
    assert order == ["body:start", "body:saw-abort", "body:end"]
    assert signals == [caller.signal]  # restored
    assert not caller.signal.aborted


async def test_uncooperative_body_runs_to_completion() -> None:
    finished: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        # Works on past its deadline without stopping. The deadline leaves room for the body to
        # start: one that has passed before dispatch means the body never runs (the pipeline's
        # rule), which a 1 ms deadline met on a loaded machine.
        await anyio.sleep(0.15)
        finished.append("done" if exec.signal.aborted else "done before the deadline")
        return "late"

    async with policy_root() as (root, _):
        root.tools.register(tool("stubborn", body, timeout_ms=100))
        with anyio.fail_after(5):
            result = await root.tools.execute(call("stubborn"))
    assert finished == ["done"]
    assert result.to_json() == timed_out("100")


async def test_fast_body_keeps_its_result() -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        assert not exec.signal.aborted
        return "quick"

    async with policy_root() as (root, _):
        root.tools.register(tool("fast", body, timeout_ms=5000))
        result = await root.tools.execute(call("fast"))
    assert result.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": "quick"}],
        "value": "quick",
    }


async def test_caller_abort_is_not_a_timeout() -> None:
    caller = AbortController()

    async def body(args: Any, exec: ToolExecution) -> str:
        caller.abort()
        await exec.signal.wait()
        return "stopped"

    async with policy_root() as (root, _):
        root.tools.register(tool("t", body, timeout_ms=60_000))
        result = await root.tools.execute(call("t", caller.signal))
    # Not TOOL_TIMEOUT: the body finished after its caller's abort, so its result stands.
    assert result.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": "stopped"}],
        "value": "stopped",
    }


async def test_tools_without_timeout_pass_through() -> None:
    caller = AbortController()
    seen: list[AbortSignal] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        seen.append(exec.signal)
        return "ok"

    async with policy_root() as (root, _):
        root.tools.register(tool("plain", body))
        result = await root.tools.execute(call("plain", caller.signal))
        unknown = await root.tools.execute(call("missing"))
    assert seen == [caller.signal]
    assert not result.is_error
    assert unknown.error is not None
    assert unknown.error.info == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}


async def test_the_agent_variant_decides_the_timeout() -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        await anyio.sleep(0.02)
        return "ok"

    async with policy_root() as (root, _):
        agent = type("Agent", (), {"ctx": root.scoped(Scope()), "session": None})()
        root.tools.register(tool("t", body))
        agent.ctx.tools.register(tool("t", body, timeout_ms=1))
        plain = await root.tools.execute(call("t"))
        limited = await root.tools.execute(call("t", agent=agent))
    assert not plain.is_error
    assert limited.to_json() == timed_out("1")


async def test_disposing_the_policy_removes_the_wrapper() -> None:
    async def body(args: Any, exec: ToolExecution) -> str:
        await anyio.sleep(0.02)
        return "ok"

    async with policy_root() as (root, fiber):
        root.tools.register(tool("t", body, timeout_ms=1))
        assert (await root.tools.execute(call("t"))).is_error
        await fiber.dispose()
        assert not (await root.tools.execute(call("t"))).is_error
