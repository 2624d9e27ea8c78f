"""A real stack for agent tests: sessions, llm + replay, tools, optional JSONL persistence."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_persistence_jsonl
import plugins.tool_timeout_policy
import plugins.tools
from framework import Context
from plugins.tools import Tool


@asynccontextmanager
async def stack(
    responses: Sequence[Any] = (),
    *,
    root: Path | None = None,
    timeout_policy: bool = False,
    agent: dict[str, Any] | None = None,
    replay: dict[str, Any] | None = None,
    persistence: dict[str, Any] | None = None,
    tools: dict[str, Any] | None = None,
    extra: Sequence[Any] = (),
) -> AsyncIterator[Context]:
    """A root context with the agent runtime mounted; `root` adds the JSONL backend (raw)."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools, tools)
        if root is not None:
            await ctx.plugin(
                plugins.session_persistence_jsonl,
                {"root": str(root), "compression": "none", **(persistence or {})},
            )
        await ctx.plugin(plugins.llm_replay, {"responses": list(responses), **(replay or {})})
        if timeout_policy:
            await ctx.plugin(plugins.tool_timeout_policy)
        for plugin in extra:
            await ctx.plugin(plugin)
        await ctx.plugin(
            plugins.agent, {"provider": "replay", "model": "replay-1", **(agent or {})}
        )
        yield ctx


def tool(
    name: str,
    body: Callable[[Any, Any], Awaitable[Any]],
    *,
    parallel: bool = False,
    timeout_ms: float | None = None,
    parameters: dict[str, Any] | None = None,
) -> Tool:
    """A test tool taking any object."""
    return Tool(
        name=name,
        description=f"the {name} tool",
        parameters=parameters if parameters is not None else {"type": "object"},
        execute=body,
        is_concurrency_safe=parallel,
        timeout_ms=timeout_ms,
    )


def types(session: Any, start: int = 0) -> list[str]:
    """Event types of a session from `start`."""
    return [event["type"] for event in session.events[start:]]


def call(call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments}
