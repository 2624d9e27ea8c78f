"""A deployment's own checkpoint policy, mounted by relative path from `replace-policy.yml`.

It keeps only the dispatch barrier: a top-level tool body still never starts before its
`tool/call` is durable, but model requests and step boundaries are left to write-behind.
"""

from __future__ import annotations

from typing import Any

from plugins.tools import aborted_before_dispatch_result

name = "dispatch-only-checkpoints"
inject = ["sessions", "tools", "sessionPersistence"]


def apply(ctx: Any, config: Any) -> None:
    async def before_dispatch(exec: Any, next: Any) -> Any:
        if exec.agent is None or exec.parent is not None:
            return await next()
        await ctx.sessions.flush(exec.agent.session)
        if exec.signal.aborted:
            return aborted_before_dispatch_result()
        return await next()

    ctx.on("tools/execute", before_dispatch)
