"""Policy decisions: `tools/pre-execute` returns `Allow | Deny | Ask`, `tools/post-execute`
returns `Accept | Block`. Every decision may leave `contexts` for the next step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .results import ContentBlock, ToolContext

_UNSET: Any = object()


@dataclass(frozen=True)
class Allow:
    """Let the call proceed to the guards and dispatch."""

    contexts: tuple[ToolContext, ...] = ()


@dataclass(frozen=True)
class Deny:
    """Refuse the call; the model sees `Error: <reason>`."""

    reason: str
    contexts: tuple[ToolContext, ...] = ()


@dataclass(frozen=True)
class Ask:
    """Ask for approval; without an approval service this denies (with `reason` if given)."""

    reason: str | None = None
    contexts: tuple[ToolContext, ...] = ()


@dataclass(frozen=True)
class Accept:
    """Keep the result; `content=` replaces its blocks, `value=` its value (not both)."""

    content: list[ContentBlock] | None = None
    value: Any = field(default=_UNSET)
    contexts: tuple[ToolContext, ...] = ()

    def __post_init__(self) -> None:
        if self.content is not None and self.replaces_value:
            raise TypeError("Accept takes content or value, not both")

    @property
    def replaces_value(self) -> bool:
        """Whether `value=` was given (`None` is a value)."""
        return self.value is not _UNSET


@dataclass(frozen=True)
class Block:
    """Turn the result into a failure whose content is `feedback` (a text or blocks)."""

    feedback: str | list[ContentBlock]
    contexts: tuple[ToolContext, ...] = ()


PreExecuteDecision = Allow | Deny | Ask
PostExecuteDecision = Accept | Block
