"""The model-visible transcript derived from a session's surface events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .events import Event, Surface

__all__ = ["derive_messages", "message_of"]


def message_of(event: Event) -> dict[str, Any]:
    """The message a surface event carries: `user/message` data itself, otherwise
    `data.message` (`assistant/message`, `tool/result`)."""
    data: dict[str, Any] = event["data"]
    message: dict[str, Any] = data if event["type"] == "user/message" else data["message"]
    return message


def derive_messages(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The messages the model sees, in surface order: `append` adds a node, `replace` swaps the
    surface range `start..end` (seqs of surface nodes, inclusive) for the new event. The events
    are assumed valid (appended or loaded through validation); the messages are not copied."""
    surface = Surface()
    for event in events:
        surface.apply(event)
    return [message_of(events[seq]) for seq in surface.nodes]
