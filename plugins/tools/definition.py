"""The `Tool` dataclass (docs/tools-and-cancellation.md) and its registration-time checks."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plugins.session.jsonutil import dumps

from .errors import ToolSchemaError
from .results import ContentBlock, ToolExecutionResult, text_block
from .schema import unsupported_keywords

if TYPE_CHECKING:
    from .execution import ToolExecution

#: The reserved presentation transport name (docs/tools-and-cancellation.md).
RESERVED_NAME = "run_code"

ToolBody = Callable[[Any, "ToolExecution"], Awaitable[Any]]
Renderer = Callable[[Any, Any], list[ContentBlock]]
ContentFinalizer = Callable[
    ["ToolExecution", ToolExecutionResult],
    "list[ContentBlock] | Awaitable[list[ContentBlock] | None] | None",
]


@dataclass(frozen=True, eq=False)
class Tool:
    """A model-callable tool.

    `execute(args, exec)` is async and returns a JSON value. Optional: `output_schema` (checked
    against the value), `render(args, value) -> blocks` (default: a string as one text block,
    anything else as compact JSON), `presentation_meta(args, value)` (→ the result's `meta`),
    `finalize_content(exec, result)` (sync or async; returns replacement blocks or None),
    `timeout_ms` (> 0, read by the timeout policy), `is_concurrency_safe` (`True`, or a
    predicate on the arguments that returns `True`, lets calls run in parallel) and `read_only`
    (the body causes no external side effect; read by approval and by `dsh fork`).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: ToolBody
    output_schema: dict[str, Any] | None = None
    render: Renderer | None = None
    presentation_meta: Renderer | None = None
    finalize_content: ContentFinalizer | None = None
    timeout_ms: float | None = None
    is_concurrency_safe: bool | Callable[[Any], bool] = False
    read_only: bool = False

    def check(self) -> None:
        """Raise if the tool cannot be registered (docs/tools-and-cancellation.md texts)."""
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"tool name must be a non-empty string, got {self.name!r}")
        if self.name == RESERVED_NAME:
            raise ValueError(
                f'tool name "{RESERVED_NAME}" is reserved for the Code Mode presentation '
                "transport and cannot be registered or shadowed"
            )
        if not callable(self.execute):
            raise TypeError(f'tool "{self.name}" execute must be an async callable')
        hooks = (self.render, self.presentation_meta)
        if any(hook is not None and not callable(hook) for hook in hooks):
            raise TypeError(
                f'tool "{self.name}" must declare output {{ schema, render, presentationMeta? }}'
            )
        timeout = self.timeout_ms
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise TypeError(f'tool "{self.name}" timeoutMs must be a positive finite number')
        for field_name, schema in (
            ("parameters", self.parameters),
            ("output_schema", self.output_schema),
        ):
            if schema is None and field_name == "output_schema":
                continue
            problems = unsupported_keywords(schema)
            if problems:
                raise ToolSchemaError(self.name, field_name, problems)

    def schema(self) -> dict[str, Any]:
        """The model-facing declaration `{"name", "description", "parameters"}`."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def concurrency_safe(self, args: Any) -> bool:
        """True only if `is_concurrency_safe` is `True` or returns `True` for `args`."""
        flag = self.is_concurrency_safe
        if callable(flag):
            try:
                return flag(args) is True
            except Exception:
                return False
        return flag is True

    def content_of(self, args: Any, value: Any) -> list[ContentBlock]:
        """The model-visible blocks for a returned value."""
        if self.render is not None:
            return self.render(args, value)
        return [text_block(value if isinstance(value, str) else dumps(value))]
