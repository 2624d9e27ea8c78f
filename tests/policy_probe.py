"""A checkpoint-policy stack whose model adapter and tool both answer to the name `probe` and
record in `ran` whether they were reached: what the fail-closed storage tests assert on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy
import plugins.tools
from framework import Context
from plugins.llm import chunks
from plugins.tools import Tool


@asynccontextmanager
async def probe_stack(
    persistence: Callable[[Context, object], Awaitable[Any]], ran: list[str]
) -> AsyncIterator[Context]:
    """Sessions, llm, tools, the `persistence` function plugin and the policy, with the probes."""

    class Adapter:
        async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
            ran.append("adapter")
            yield chunks.finish(chunks.stop_reason("stop"))

    async def body(args: Any, exec: Any) -> Any:
        ran.append("tool")
        return None

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(persistence)
        await ctx.plugin(plugins.session_checkpoint_policy)
        ctx.llm.register_adapter("probe", Adapter())
        ctx.tools.register(Tool(name="probe", description="p", parameters={}, execute=body))
        yield ctx
