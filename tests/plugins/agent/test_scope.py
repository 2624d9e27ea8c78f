"""Agent-scoped listeners and tools see only their own agent (docs/agent-loop.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_helpers import call, stack, tool

pytestmark = pytest.mark.anyio


async def test_agent_scoped_listeners_never_see_another_agents_events() -> None:
    seen: dict[str, list[tuple[str, str]]] = {"a": [], "b": [], "global": []}

    def recorder(key: str) -> Callable[..., Any]:
        async def pre_step(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            seen[key].append(("pre-step", payload.agent.id))
            return await next()

        return pre_step

    def executor(key: str) -> Callable[..., Any]:
        async def wrap(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            seen[key].append(("execute", exec.agent.id))
            return await next()

        return wrap

    async def echo(args: Any, exec: Any) -> Any:
        return "echo"

    script = [{"tool_calls": [call("c", "echo")]}, {"text": "ok"}]
    async with stack(script) as ctx:
        ctx.tools.register(tool("echo", echo))
        ctx.on("agent/pre-step", recorder("global"))

        def setup_for(key: str) -> Callable[[Any], None]:
            def setup(agent_ctx: Any) -> None:
                agent_ctx.on("agent/pre-step", recorder(key))
                agent_ctx.on("tools/execute", executor(key))
                agent_ctx.on("agent/status", lambda agent: seen[key].append(("status", agent.id)))

                def stream(options: Any, next: Callable[[], Any]) -> Any:
                    seen[key].append(("stream", options.session_id))
                    return next()

                agent_ctx.on("llm/stream", stream)

            return setup

        a = await ctx.agents.create("agent-a", setup=setup_for("a"))
        b = await ctx.agents.create("agent-b", setup=setup_for("b"))
        a.agent.followup("hi a")
        await a.agent.when_idle()
        b.agent.followup("hi b")
        await b.agent.when_idle()
        assert {agent for _, agent in seen["a"]} == {"agent-a"}
        assert {agent for _, agent in seen["b"]} == {"agent-b"}
        assert ("execute", "agent-a") in seen["a"]
        assert ("status", "agent-a") in seen["a"]
        assert ("stream", "agent-a") in seen["a"]
        assert seen["global"] == [
            ("pre-step", "agent-a"),
            ("pre-step", "agent-a"),
            ("pre-step", "agent-b"),
            ("pre-step", "agent-b"),
        ]
        await a.dispose()
        await b.dispose()


async def test_a_tool_registered_through_agent_ctx_is_private_and_unwinds() -> None:
    async def secret(args: Any, exec: Any) -> Any:
        return "secret"

    async with stack([{"text": "ok"}, {"text": "ok"}]) as ctx:
        a = await ctx.agents.create(
            "with-tool", setup=lambda agent_ctx: agent_ctx.tools.register(tool("secret", secret))
        )
        b = await ctx.agents.create("without-tool")
        assert [t["name"] for t in ctx.tools.schemas(a.agent)] == ["secret"]
        assert ctx.tools.schemas(b.agent) == []
        a.agent.followup("x")
        await a.agent.when_idle()
        header = next(e for e in a.agent.session.events if e["type"] == "request/header")
        assert [t["name"] for t in header["data"]["header"]["tools"]] == ["secret"]
        await a.dispose()
        assert ctx.tools.schemas(a.agent) == []
        await b.dispose()
