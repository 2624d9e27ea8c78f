"""Errors of the tools runtime: `HarnessError`s with stable codes.

See docs/tools-and-cancellation.md.
"""

from __future__ import annotations

from plugins.llm import HarnessError

#: Result codes (`info.code`) of the tools runtime.
ABORTED = "ABORTED"
ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
UNKNOWN_TOOL = "UNKNOWN_TOOL"
INVALID_ARGS = "INVALID_ARGS"
INVALID_TOOL_OUTPUT = "INVALID_TOOL_OUTPUT"
TOOL_TIMEOUT = "TOOL_TIMEOUT"
TOOL_CANCELLED = "TOOL_CANCELLED"
UNSUPPORTED_SCHEMA = "UNSUPPORTED_SCHEMA"

#: What the model reads when its call was aborted (`ABORTED`) or cut short (`TOOL_CANCELLED`)
#: while the body ran: the body began, so its effects may have happened.
ABORTED_MESSAGE = (
    "tool call aborted while it ran: its effects may have happened; verify before retrying"
)
CUT_SHORT_MESSAGE = (
    "tool call cut short: it was cancelled mid-body after the cancellation grace, so its "
    "effects may have happened; verify before retrying"
)


class ToolNotFoundError(HarnessError):
    """No tool of that name is visible to the call."""

    def __init__(self, name: str) -> None:
        super().__init__(f'unknown tool "{name}"', UNKNOWN_TOOL)


class ToolArgsError(HarnessError):
    """The call's arguments violate the tool's `parameters` schema."""

    def __init__(self, violations: list[str]) -> None:
        super().__init__(f"invalid arguments: {'; '.join(violations)}", INVALID_ARGS)


class ToolOutputError(HarnessError):
    """The tool returned a value that violates its `output_schema`."""

    def __init__(self, name: str, violations: list[str]) -> None:
        message = f'tool "{name}" returned invalid output: {"; ".join(violations)}'
        super().__init__(message, INVALID_TOOL_OUTPUT)


class ToolTimeoutError(HarnessError):
    """The tool's deadline fired; the timeout policy reports it as the call's result."""

    def __init__(self, message: str) -> None:
        super().__init__(message, TOOL_TIMEOUT)


class ToolCancelledError(HarnessError):
    """The body was still running when the cancellation grace ended and was cut short."""

    def __init__(self) -> None:
        super().__init__(CUT_SHORT_MESSAGE, TOOL_CANCELLED)


class ToolSchemaError(HarnessError):
    """A tool declares a JSON Schema outside the supported subset."""

    def __init__(self, name: str, field: str, problems: list[str]) -> None:
        message = (
            f'tool "{name}" {field} use JSON Schema outside the supported subset: '
            + "; ".join(problems)
        )
        super().__init__(message, UNSUPPORTED_SCHEMA)
