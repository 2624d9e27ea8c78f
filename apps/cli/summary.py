"""Facts about a session log a person wants at a glance: turns, outcome, crash repairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plugins.agent.reasons import reason_text as reason_text
from plugins.session.jsonutil import dumps

Event = Mapping[str, Any]


def turn_count(events: Sequence[Event]) -> int:
    """How many turns the log started."""
    return sum(1 for event in events if event["type"] == "turn/start")


def last_turn_reason(events: Sequence[Event]) -> dict[str, Any] | None:
    """The reason of the last `turn/end`, or None."""
    for event in reversed(events):
        if event["type"] == "turn/end":
            reason: dict[str, Any] = event["data"]["reason"]
            return reason
    return None


def message_text(message: Mapping[str, Any], block_type: str = "text") -> str:
    """The text of a message's `block_type` blocks, joined."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return "".join(b.get("text", "") for b in blocks if b.get("type") == block_type)


def tool_result_text(message: Mapping[str, Any]) -> str:
    """The text of a tool result message's `tool-result` block."""
    for block in message.get("content", ()):
        if block.get("type") == "tool-result":
            inner = block.get("content")
            if isinstance(inner, str):
                return inner
            if isinstance(inner, list):
                return content_text(inner)
    return ""


def content_text(parts: Sequence[Mapping[str, Any]]) -> str:
    """A tool result's content as one text: text parts as they are, other parts as JSON."""
    return "".join(
        part.get("text", "") if part.get("type") == "text" else dumps(part) for part in parts
    )


def tool_result_is_error(message: Mapping[str, Any]) -> bool:
    """Whether the tool result message reports a failure."""
    return any(b.get("isError") is True for b in message.get("content", ()))


def short(text: str, limit: int = 160) -> str:
    """One line of at most `limit` characters."""
    flat = text.replace("\r", "").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
