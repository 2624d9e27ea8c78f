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

from pydantic import BaseModel, ConfigDict, Field

from framework import Context

from .decisions import Accept, Allow, Ask, Block, Deny
from .decorator import tool
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
from .service import DEFAULT_GRACE_MS, ExecutionMode, ToolsService
from .tool import Tool

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


class Config(BaseModel):
    """`dsh-tools` configuration."""

    model_config = ConfigDict(extra="forbid")

    #: Once a call's caller aborts, how long its body may keep running before it is cancelled
    #: at its next await point, in ms (0: at once).
    cancel_grace_ms: float = Field(default=DEFAULT_GRACE_MS, ge=0, allow_inf_nan=False)


def apply(ctx: Context, config: Config) -> None:
    """Provide the `tools` service."""
    ctx.provide("tools", ToolsService(ctx, config.cancel_grace_ms))
