"""The events the tools pipeline dispatches (docs/writing-plugins.md, "Events").

Dispatched through `exec.agent.ctx` when the call has an agent (so scoped to it), else through
the tools service's own context. Waterfall listeners are async and `await next()`; what each
returns is checked by the bus against `returns`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

from framework import Emit, Waterfall

from .decisions import Accept, Allow, Ask, Block, Deny
from .execution import ToolExecution
from .results import ToolExecutionResult

__all__ = ["EXECUTE", "POST_EXECUTE", "PRE_EXECUTE", "RESULT"]

PRE_EXECUTE: Waterfall[ToolExecution, Awaitable[Allow | Deny | Ask]] = Waterfall(
    "tools/pre-execute",
    returns=(Allow, Deny, Ask),
    awaits=True,
    error="tools/pre-execute must return Allow, Deny or Ask, got {got}",
)
"""`(exec, next)` before the guards: may the call run?"""

EXECUTE: Waterfall[ToolExecution, Awaitable[ToolExecutionResult]] = Waterfall(
    "tools/execute",
    returns=(ToolExecutionResult, Mapping),  # a result, or its persisted JSON form
    awaits=True,
    error="tools/execute listener must return a tool result, got {got}",
)
"""`(exec, next)` around the tool body: barriers, timeouts, wrappers."""

POST_EXECUTE: Waterfall[ToolExecution, ToolExecutionResult, Awaitable[Accept | Block]] = Waterfall(
    "tools/post-execute",
    returns=(Accept, Block),
    awaits=True,
    error="tools/post-execute must return Accept or Block, got {got}",
)
"""`(exec, result, next)` after the body: keep, rewrite or block the result."""

RESULT: Emit[ToolExecution, ToolExecutionResult] = Emit("tools/result")
"""`(exec, result)` once the call's final result is known (observers)."""
