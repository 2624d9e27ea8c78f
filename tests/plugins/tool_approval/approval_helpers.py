"""A real agent stack with the approval plugin, for the approval tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl
import plugins.tool_approval
import plugins.tools
from framework import Context
from plugins.tools import Tool


@asynccontextmanager
async def stack(
    responses: Sequence[Any] = (),
    *,
    root: Path | None = None,
    approval: dict[str, Any] | None = None,
    with_approval: bool = True,
    tools: Sequence[Tool] = (),
) -> AsyncIterator[Context]:
    """Sessions, the replay model, tools, the approval plugin and an agent; `root` adds JSONL
    persistence and the checkpoint policy."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        if root is not None:
            await ctx.plugin(
                plugins.session_persistence_jsonl, {"root": str(root), "compression": "none"}
            )
            await ctx.plugin(plugins.session_checkpoint_policy)
        await ctx.plugin(plugins.llm_replay, {"responses": list(responses)})
        for item in tools:
            ctx.tools.register(item)
        if with_approval:
            await ctx.plugin(plugins.tool_approval, approval or {})
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay-1"})
        yield ctx


class Recorder:
    """A tool body that counts its runs."""

    def __init__(self, value: Any = "done") -> None:
        self.calls: list[Any] = []
        self.value = value

    async def __call__(self, args: Any, exec: Any) -> Any:
        self.calls.append(args)
        return self.value


def tool(name: str, body: Callable[[Any, Any], Awaitable[Any]], *, read_only: bool = False) -> Tool:
    """A test tool taking any object."""
    return Tool(
        name=name,
        description=f"the {name} tool",
        parameters={"type": "object"},
        execute=body,
        read_only=read_only,
    )


def call(call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments}


def types(session: Any, start: int = 0) -> list[str]:
    """Event types of a session from `start`."""
    return [event["type"] for event in session.events[start:]]


def of_type(session: Any, kind: str) -> list[dict[str, Any]]:
    """The data of every event of `kind`."""
    return [event["data"] for event in session.events if event["type"] == kind]


def result_texts(session: Any) -> dict[str, str]:
    """callId → the text of its tool result."""
    texts = {}
    for data in of_type(session, "tool/result"):
        block = data["message"]["content"][0]
        texts[block["toolCallId"]] = "".join(part.get("text", "") for part in block["content"])
    return texts
