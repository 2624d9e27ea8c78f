"""Tools runtime (`dsh-tools`): the `tools` service, the `Tool` type and the execution pipeline.

Namespace plugin: `apply(ctx, config)` provides `ctx.tools`. Register a tool from any plugin with
`ctx.tools.register(Tool(name=..., description=..., parameters=..., execute=...))` or of an
async function decorated with `@tool` (docs/writing-tools.md); it is undone with that plugin.
Events (dispatched through `exec.agent.ctx` when the call has an agent):
`tools/pre-execute` waterfall `(exec, next)` → `Allow | Deny | Ask`; `tools/execute` waterfall
`(exec, next)` → result; `tools/post-execute` waterfall `(exec, result, next)` → `Accept |
Block`; `tools/result` emit `(exec, result)`. Waterfall listeners are async and `await next()`.
"""

from __future__ import annotations

from typing import Any

from .decisions import Accept, Allow, Ask, Block, Deny
from .decorator import tool
from .errors import (
    ToolArgsError,
    ToolNotFoundError,
    ToolOutputError,
    ToolSchemaError,
    ToolTimeoutError,
)
from .execution import AgentLike, ExecutionToken, ToolExecution, ToolExecutionInput
from .pipeline import PreparedCall, ToolScheduler
from .results import (
    ToolExecutionResult,
    ToolFailure,
    aborted_before_dispatch_result,
    aborted_result,
    exception_result,
    failure_result,
)
from .service import ExecutionMode, ToolsService
from .tool import Tool

__all__ = [
    "Accept",
    "AgentLike",
    "Allow",
    "Ask",
    "Block",
    "Deny",
    "ExecutionMode",
    "ExecutionToken",
    "PreparedCall",
    "Tool",
    "ToolArgsError",
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
    "apply",
    "exception_result",
    "failure_result",
    "name",
    "tool",
]

name = "tools"


def apply(ctx: Any, config: Any = None) -> None:
    """Provide the `tools` service."""
    ctx.provide("tools", ToolsService(ctx))
