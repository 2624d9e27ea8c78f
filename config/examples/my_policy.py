"""A deployment's own checkpoint policy, mounted by relative path from `replace-policy.yml`.

It keeps only the dispatch barrier: a top-level tool body still never starts before its
`tool/call` is durable, but model requests and step boundaries are left to write-behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from framework import Context
from plugins.session import SessionStore
from plugins.tools import ToolExecution, ToolExecutionResult, aborted_before_dispatch_result
from plugins.tools.hooks import EXECUTE

name = "dispatch-only-checkpoints"
inject = ["sessions", "tools", "sessionPersistence"]


def apply(ctx: Context, config: object) -> None:
    async def before_dispatch(
        exec: ToolExecution, next: Callable[[], Awaitable[ToolExecutionResult]]
    ) -> ToolExecutionResult:
        if exec.agent is None or exec.parent is not None:
            return await next()
        await ctx.service(SessionStore).flush(exec.agent.session)
        if exec.signal.aborted:
            return aborted_before_dispatch_result()
        return await next()

    ctx.on(EXECUTE, before_dispatch)
