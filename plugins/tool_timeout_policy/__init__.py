"""Tool timeout policy (`dsh-tool-timeout-policy`, docs/tools-and-cancellation.md).

One `tools/execute` wrapper: for a tool with `timeout_ms`, the inner pipeline (and the body)
sees `exec.signal` swapped for a deadline signal; if that deadline fired, the call's result is
the `TOOL_TIMEOUT` failure. The body is never killed: the wrapper always awaits it (cooperative
cancellation), and `exec.signal` is restored afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from framework import deadline, timeout_of

if TYPE_CHECKING:
    from framework import Context
    from plugins.tools import ToolExecution, ToolExecutionResult

# `plugins.tools` is imported in the functions' bodies: resolving the plugin (`dsh sessions`)
# does not import the tools machinery (docs/performance.md, "Start-up (P11)").

__all__ = ["aliases", "apply", "inject", "name", "timeout_result"]

name = "tool-timeout-policy"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-tool-timeout-policy", "@deepseek-ai/dsh-tool-call-timeout-policy"]
inject = ["tools"]

TOOL_TIMEOUT = "TOOL_TIMEOUT"


def timeout_result(ms: float) -> ToolExecutionResult:
    """The `TOOL_TIMEOUT` result; `ms` prints like a JavaScript number (`5000`, `0.5`)."""
    from plugins.session.jsonutil import dumps
    from plugins.tools import ToolTimeoutError, exception_result

    return exception_result(ToolTimeoutError(f"tool call timed out after {dumps(ms)}ms"))


def apply(ctx: Context, config: object = None) -> None:
    """Register the deadline wrapper (a fiber effect)."""
    from plugins.tools import ToolsService
    from plugins.tools.hooks import EXECUTE

    async def wrapper(
        exec: ToolExecution, next: Callable[[], Awaitable[ToolExecutionResult]]
    ) -> ToolExecutionResult:
        tool = ctx.service(ToolsService).get(exec.name, exec.agent)
        ms = None if tool is None else tool.timeout_ms
        if ms is None:
            return await next()
        with deadline(exec.signal, ms, TOOL_TIMEOUT) as limit:
            previous, exec.signal = exec.signal, limit.signal
            try:
                result = await next()
            finally:
                exec.signal = previous
            if timeout_of(limit.signal, TOOL_TIMEOUT):
                return timeout_result(ms)
            return result

    ctx.on(EXECUTE, wrapper)
