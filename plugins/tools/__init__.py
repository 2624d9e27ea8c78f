"""Tools runtime (`dsh-tools`): the `tools` service, the `Tool` type and the execution pipeline.

Namespace plugin: `apply(ctx, config)` provides `ctx.tools`. Register a tool from any plugin with
`ctx.tools.register(Tool(name=..., description=..., parameters=..., execute=...))` or of an
async function decorated with `@tool` (docs/writing-tools.md); it is undone with that plugin.
Events (dispatched through `exec.agent.ctx` when the call has an agent):
`tools/pre-execute` waterfall `(exec, next)` → `Allow | Deny | Ask`; `tools/execute` waterfall
`(exec, next)` → result; `tools/post-execute` waterfall `(exec, result, next)` → `Accept |
Block`; `tools/result` emit `(exec, result)`. Waterfall listeners are async and `await next()`.

Config: `cancel_grace_ms` (2000): once a call's caller aborts, how long its body may keep
running before it is cancelled at its next await point; `ctx.tools.skip_grace()` cuts it short
at once (docs/tools-and-cancellation.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context

    from .config import Config
    from .decisions import Accept, Allow, Ask, Block, Deny
    from .decorator import tool
    from .definition import Tool
    from .errors import (
        ToolArgsError,
        ToolCancelledError,
        ToolNotFoundError,
        ToolOutputError,
        ToolSchemaError,
        ToolTimeoutError,
    )
    from .execution import (
        AgentLike,
        ExecutionToken,
        ToolExecution,
        ToolExecutionInput,
        idempotency_key,
    )
    from .pipeline import PreparedCall, ToolScheduler
    from .results import (
        ToolExecutionResult,
        ToolFailure,
        aborted_before_dispatch_result,
        aborted_result,
        cancelled_result,
        exception_result,
        failure_result,
    )
    from .service import ExecutionMode, ToolsService

__all__ = [
    "Accept",
    "AgentLike",
    "Allow",
    "Ask",
    "Block",
    "Config",
    "Deny",
    "ExecutionMode",
    "ExecutionToken",
    "PreparedCall",
    "Tool",
    "ToolArgsError",
    "ToolCancelledError",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolExecutionResult",
    "ToolFailure",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolScheduler",
    "ToolSchemaError",
    "ToolTimeoutError",
    "ToolsService",
    "aborted_before_dispatch_result",
    "aborted_result",
    "aliases",
    "apply",
    "cancelled_result",
    "exception_result",
    "failure_result",
    "idempotency_key",
    "name",
    "tool",
]

name = "tools"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-tools"]
#: What `apply` provides, for the loader to read without importing the service (docs/concepts.md).
provides = ["tools"]


def apply(ctx: Context, config: Config) -> None:
    """Provide the `tools` service."""
    from .service import ToolsService

    ctx.provide("tools", ToolsService(ctx, config.cancel_grace_ms))


#: The module of each public name. The package imports one on the first use of one of its names:
#: resolving the plugin (`dsh sessions`) does not import its machinery (docs/performance.md,
#: "Start-up (P11)").
_HOMES: dict[str, str] = {
    "Config": "config",
    "Accept": "decisions",
    "Allow": "decisions",
    "Ask": "decisions",
    "Block": "decisions",
    "Deny": "decisions",
    "tool": "decorator",
    "Tool": "definition",
    "ToolArgsError": "errors",
    "ToolCancelledError": "errors",
    "ToolNotFoundError": "errors",
    "ToolOutputError": "errors",
    "ToolSchemaError": "errors",
    "ToolTimeoutError": "errors",
    "AgentLike": "execution",
    "ExecutionToken": "execution",
    "ToolExecution": "execution",
    "ToolExecutionInput": "execution",
    "idempotency_key": "execution",
    "PreparedCall": "pipeline",
    "ToolScheduler": "pipeline",
    "ToolExecutionResult": "results",
    "ToolFailure": "results",
    "aborted_before_dispatch_result": "results",
    "aborted_result": "results",
    "cancelled_result": "results",
    "exception_result": "results",
    "failure_result": "results",
    "ExecutionMode": "service",
    "ToolsService": "service",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
