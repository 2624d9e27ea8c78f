"""Tool results: `ToolFailure`, `ToolExecutionResult` and the canonical constructors
(docs/tools-and-cancellation.md).

`to_json()` gives the persisted camelCase shape
`{"isError", "content", "value"? (success), "error"? {"message", "info"? {"name", "code"}},
"meta"?, "additionalContexts"?, "concludesTurn"?}`; `from_json` reads it back (wrappers may
return either form).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plugins.llm import HarnessError

from .errors import ABORTED, ABORTED_BEFORE_DISPATCH, ABORTED_MESSAGE, ToolCancelledError

#: A content block (`{"type": "text", "text": ...}`, ...), JSON as persisted.
ContentBlock = dict[str, Any]
#: A context a call leaves for the next step: a message text or a message dict.
ToolContext = str | dict[str, Any]

BLOCKED_MESSAGE = "tool result blocked by post-execute policy"


@dataclass(frozen=True)
class ToolFailure:
    """Why a call failed: `message` (no `Error: ` prefix) and, for `HarnessError`s, `info`."""

    message: str
    info: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"message", "info"?: {"name", "code"}}`."""
        if self.info is None:
            return {"message": self.message}
        return {"message": self.message, "info": dict(self.info)}


@dataclass(frozen=True)
class ToolExecutionResult:
    """The outcome of one tool call; `value` is meaningful on success, `error` on failure."""

    is_error: bool
    content: list[ContentBlock]
    value: Any = None
    error: ToolFailure | None = None
    meta: Any = None
    additional_contexts: list[ToolContext] = field(default_factory=list)
    concludes_turn: bool = False

    def to_json(self) -> dict[str, Any]:
        """The persisted camelCase shape; absent optional fields are omitted."""
        out: dict[str, Any] = {"isError": self.is_error, "content": self.content}
        if not self.is_error:
            out["value"] = self.value
        if self.error is not None:
            out["error"] = self.error.to_json()
        if self.meta is not None:
            out["meta"] = self.meta
        if self.additional_contexts:
            out["additionalContexts"] = self.additional_contexts
        if self.concludes_turn:
            out["concludesTurn"] = True
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolExecutionResult:
        """Read the persisted shape; raises `TypeError` naming the first malformed field."""
        is_error = data.get("isError")
        if not isinstance(is_error, bool):
            raise TypeError("tool result field isError must be a boolean")
        content = _blocks(data.get("content"), "tool result field content")
        error: ToolFailure | None = None
        raw_error = data.get("error")
        if raw_error is not None:
            error = _failure(raw_error)
        elif is_error:
            error = ToolFailure(content_message(content))
        contexts = data.get("additionalContexts", [])
        if not isinstance(contexts, list):
            raise TypeError("tool result field additionalContexts must be a list")
        return cls(
            is_error=is_error,
            content=content,
            value=None if is_error else data.get("value"),
            error=error if is_error else None,
            meta=data.get("meta"),
            additional_contexts=list(contexts),
            concludes_turn=data.get("concludesTurn") is True,
        )


def _blocks(value: object, what: str) -> list[ContentBlock]:
    if not isinstance(value, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in value
    ):
        raise TypeError(f"{what} must be a list of content blocks with a string type")
    return list(value)


def _failure(value: object) -> ToolFailure:
    if not isinstance(value, Mapping) or not isinstance(value.get("message"), str):
        raise TypeError("tool result field error must be an object with a string message")
    info = value.get("info")
    if info is None:
        return ToolFailure(value["message"])
    if not (
        isinstance(info, Mapping)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("code"), str)
    ):
        raise TypeError("tool result field error.info must be {name, code} strings")
    return ToolFailure(value["message"], {"name": info["name"], "code": info["code"]})


def text_block(text: str) -> ContentBlock:
    """`{"type": "text", "text": text}`."""
    return {"type": "text", "text": text}


def content_message(blocks: Sequence[ContentBlock]) -> str:
    """Text blocks joined by newlines, other blocks as `[<type> content]`; empty → a default."""
    parts = [
        block["text"]
        if block["type"] == "text" and isinstance(block.get("text"), str)
        else f"[{block['type']} content]"
        for block in blocks
    ]
    return "\n".join(parts) or BLOCKED_MESSAGE


def failure_result(message: str, info: Mapping[str, str] | None = None) -> ToolExecutionResult:
    """A failed call: content `Error: <message>`, `error {message, info?}`."""
    return ToolExecutionResult(
        is_error=True,
        content=[text_block(f"Error: {message}")],
        error=ToolFailure(message, None if info is None else dict(info)),
    )


def exception_message(error: BaseException) -> str:
    """`str(error)`, the class name if that is empty, `<unprintable thrown value>` if it fails."""
    try:
        return str(error) or type(error).__name__
    except Exception:
        return "<unprintable thrown value>"


def exception_result(error: BaseException) -> ToolExecutionResult:
    """The failure result for an exception; `info {name, code}` only for a `HarnessError`."""
    info = {"name": error.name, "code": error.code} if isinstance(error, HarnessError) else None
    return failure_result(exception_message(error), info)


def aborted_result() -> ToolExecutionResult:
    """The `ABORTED` result: the body began and failed once its signal had aborted."""
    return failure_result(ABORTED_MESSAGE, {"name": "AbortError", "code": ABORTED})


def cancelled_result() -> ToolExecutionResult:
    """The `TOOL_CANCELLED` result: the body outlived the cancellation grace and was cut short."""
    return exception_result(ToolCancelledError())


def aborted_before_dispatch_result() -> ToolExecutionResult:
    """The canonical `ABORTED_BEFORE_DISPATCH` result: the body never started."""
    return failure_result(
        "tool call aborted before dispatch",
        {"name": "AbortError", "code": ABORTED_BEFORE_DISPATCH},
    )
