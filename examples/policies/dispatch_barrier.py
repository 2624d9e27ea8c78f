"""A checkpoint policy of one's own: make a tool call durable before its body runs.

A policy is an ordinary plugin that listens to the runtime's hooks. This one wraps every
top-level tool call (`tools/execute` is a waterfall: the first listener is the outermost) and
flushes the session before calling `next()`, so a crash during the body always finds the call in
the log, and recovery reports its outcome as unknown instead of forgetting it. Mount it by path
from a manifest row: `{"id": "checkpoints", "name": "./policies/dispatch_barrier.py"}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from plugins.tools import ToolExecution, ToolExecutionResult, aborted_before_dispatch_result

name = "dispatch-barrier"
inject = ["sessions", "tools", "sessionPersistence"]


class Config(BaseModel):
    """`announce`: print a line each time the policy flushes."""

    model_config = ConfigDict(extra="forbid")
    announce: bool = False


def apply(ctx: Any, config: Config) -> None:
    """Install the barrier; it is removed with the plugin."""

    async def before_dispatch(
        exec: ToolExecution, next: Callable[[], Awaitable[ToolExecutionResult]]
    ) -> ToolExecutionResult:
        if exec.agent is None or exec.parent is not None:
            return await next()  # not an agent's top-level call: nothing to protect
        await ctx.sessions.flush(exec.agent.session)
        if config.announce:
            print(f"  policy: flushed before {exec.name}")
        if exec.signal.aborted:  # cancelled while flushing: the body must not start
            return aborted_before_dispatch_result()
        return await next()

    ctx.on("tools/execute", before_dispatch)
