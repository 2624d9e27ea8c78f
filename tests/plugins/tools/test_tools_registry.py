"""The registry: registration checks, owner tracing, per-agent layers, schemas, guards, modes."""

from __future__ import annotations

import math
from typing import Any

import pytest

import plugins.tools as tools_plugin
from framework import Context
from plugins.tools import Tool, ToolExecution, ToolSchemaError

pytestmark = pytest.mark.anyio


async def test_plugin_shape() -> None:
    assert tools_plugin.name == "tools"
    async with Context() as root:
        fiber = root.plugin(tools_plugin)
        await fiber
        assert isinstance(root.tools, tools_plugin.ToolsService)
        await fiber.dispose()
        with pytest.raises(AttributeError):
            root.tools  # noqa: B018


async def test_registration_errors(tools_root: Any, agent_of: Any, make_tool: Any) -> None:
    async with tools_root() as root:
        agent = agent_of(root)
        with pytest.raises(
            TypeError,
            match=r'^tool "r" must declare output \{ schema, render, presentationMeta\? \}$',
        ):
            root.tools.register(make_tool("r", render="text"))
        for bad in (0, -1, math.inf, math.nan, True, "5"):
            with pytest.raises(
                TypeError, match=r'^tool "t" timeoutMs must be a positive finite number$'
            ):
                root.tools.register(make_tool("t", timeout_ms=bad))
        reserved = (
            'tool name "run_code" is reserved for the Code Mode presentation transport and '
            "cannot be registered or shadowed"
        )
        for ctx in (root, agent.ctx):
            with pytest.raises(ValueError) as caught:
                ctx.tools.register(make_tool("run_code"))
            assert str(caught.value) == reserved
        with pytest.raises(ToolSchemaError) as schema_error:
            root.tools.register(make_tool("s", parameters={"type": "object", "anyOf": []}))
        assert (schema_error.value.name, schema_error.value.code) == (
            "ToolSchemaError",
            "UNSUPPORTED_SCHEMA",
        )
        assert str(schema_error.value) == (
            'tool "s" parameters use JSON Schema outside the supported subset: '
            'keyword "anyOf" at #/anyOf'
        )
        with pytest.raises(ToolSchemaError, match="output_schema"):
            root.tools.register(make_tool("s", output_schema={"minimum": 1}))
        with pytest.raises(TypeError, match="register\\(\\) takes a Tool, got dict"):
            root.tools.register({"name": "x"})

        root.tools.register(make_tool("echo", timeout_ms=0.5))
        with pytest.raises(ValueError) as duplicate:
            root.tools.register(make_tool("echo"))
        assert str(duplicate.value) == (
            'tool "echo" is already registered (for a per-agent variant, register through '
            "that agent's `agent.ctx` instead)"
        )
        agent.ctx.tools.register(make_tool("echo"))
        with pytest.raises(ValueError) as scoped:
            agent.ctx.tools.register(make_tool("echo"))
        assert str(scoped.value) == 'tool "echo" is already registered in this scope'


async def test_owner_tracing_unregisters_with_the_plugin(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    async with tools_root() as root:

        def plugin(ctx: Any, config: Any) -> None:
            ctx.tools.register(make_tool("owned"))
            ctx.tools.guard(lambda exec: "guarded")

        fiber = root.plugin(plugin, inject=["tools"])
        await fiber
        assert root.tools.get("owned") is not None
        assert [s["name"] for s in root.tools.schemas()] == ["owned"]
        assert (await root.tools.execute(call("owned"))).to_json()["content"] == [
            {"type": "text", "text": "Error: guarded"}
        ]
        await fiber.dispose()
        assert root.tools.get("owned") is None
        assert root.tools.schemas() == []
        assert (await root.tools.execute(call("owned"))).error.info["code"] == "UNKNOWN_TOOL"

        # Re-registration after disposal is allowed; the returned disposer also unregisters.
        dispose = root.tools.register(make_tool("owned"))
        assert root.tools.get("owned") is not None
        dispose()
        assert root.tools.get("owned") is None


async def test_agent_layers_shadow_globals(
    tools_root: Any, agent_of: Any, call: Any, make_tool: Any
) -> None:
    def answering(value: str) -> Any:
        async def body(args: Any, exec: ToolExecution) -> str:
            return value

        return body

    async with tools_root() as root:
        root.tools.register(make_tool("first", answering("global first")))
        root.tools.register(make_tool("shared", answering("global")))
        root.tools.register(make_tool("last", answering("global last")))

        lifetime = root.plugin(lambda ctx, config: None, inject=["tools"])
        await lifetime
        a = agent_of(lifetime.ctx)
        b = agent_of(root)
        child = agent_of(lifetime.ctx, a.ctx.scope)
        a.ctx.tools.register(make_tool("shared", answering("agent a")))
        a.ctx.tools.register(make_tool("private", answering("only a")))
        local = make_tool("shared", answering("child"))
        child.ctx.tools.register(local)

        assert [s["name"] for s in root.tools.schemas(a)] == ["first", "shared", "last", "private"]
        assert root.tools.schemas(a)[1]["description"] == "the shared tool"
        assert [s["name"] for s in root.tools.schemas(b)] == ["first", "shared", "last"]
        assert root.tools.get("shared", child) is local
        assert root.tools.get("private", child) is not None
        assert root.tools.get("private", b) is None

        async def value(name: str, agent: Any) -> Any:
            return (await root.tools.execute(call(name, agent=agent))).value

        assert await value("shared", a) == "agent a"
        assert await value("shared", b) == "global"
        assert await value("shared", None) == "global"
        assert await value("shared", child) == "child"
        assert await value("private", a) == "only a"

        await lifetime.dispose()  # the agent's sub-lifetime unwinds its layer
        assert await value("shared", a) == "global"
        assert root.tools.get("private", a) is None
        assert [s["name"] for s in root.tools.schemas(a)] == ["first", "shared", "last"]


async def test_guards_are_layered(
    tools_root: Any, agent_of: Any, call: Any, make_tool: Any
) -> None:
    async with tools_root() as root:
        a, b = agent_of(root), agent_of(root)
        a.ctx.tools.guard(lambda exec: "a says no")
        root.tools.register(make_tool())
        assert (await root.tools.execute(call("echo", agent=a))).error.message == "a says no"
        assert not (await root.tools.execute(call("echo", agent=b))).is_error
        root.tools.guard(lambda exec: "global says no")
        assert (await root.tools.execute(call("echo", agent=a))).error.message == "global says no"


async def test_execution_mode(tools_root: Any, agent_of: Any, make_tool: Any) -> None:
    def explode(args: Any) -> bool:
        raise RuntimeError("no")

    async with tools_root() as root:
        agent = agent_of(root)
        root.tools.register(make_tool("safe", is_concurrency_safe=True))
        root.tools.register(make_tool("plain"))
        root.tools.register(make_tool("truthy", is_concurrency_safe=1))
        root.tools.register(make_tool("pred", is_concurrency_safe=lambda args: args.get("ro")))
        root.tools.register(make_tool("boom", is_concurrency_safe=explode))
        agent.ctx.tools.register(make_tool("safe"))
        mode = root.tools.execution_mode
        assert mode("safe", {}) == "parallel"
        assert mode("safe", {}, agent) == "exclusive"
        assert mode("plain", {}) == "exclusive"
        assert mode("truthy", {}) == "exclusive"
        assert mode("pred", {"ro": True}) == "parallel"
        assert mode("pred", {"ro": 1}) == "exclusive"
        assert mode("boom", {}) == "exclusive"
        assert mode("missing", {}) == "exclusive"


def test_tool_schema_declaration() -> None:
    async def body(args: Any, exec: ToolExecution) -> None:
        return None

    tool = Tool(name="n", description="d", parameters={"type": "object"}, execute=body)
    assert tool.schema() == {"name": "n", "description": "d", "parameters": {"type": "object"}}
