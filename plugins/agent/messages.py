"""Builders for the messages the loop persists, in the original harness's key order."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from plugins.session.jsonutil import snapshot

Message = dict[str, Any]


def user_message(message: str | Mapping[str, Any]) -> Message:
    """A user message: text becomes one text block; a mapping is checked, copied and given an id.

    A mapping must have `role` "user" and a `content` list; `source` defaults to the user.
    """
    if isinstance(message, str):
        return {
            "content": [{"type": "text", "text": message}],
            "source": {"kind": "user"},
            "role": "user",
            "id": str(uuid.uuid4()),
        }
    if not isinstance(message, Mapping):
        raise TypeError(f"an inbox message must be a str or a message mapping, got {message!r}")
    if message.get("role") != "user":
        raise ValueError(f'an inbox message must have role "user", got {message.get("role")!r}')
    if not isinstance(message.get("content"), list):
        raise ValueError("an inbox message must have a content list")
    copy: Message = snapshot(dict(message))
    copy.setdefault("source", {"kind": "user"})
    copy.setdefault("id", str(uuid.uuid4()))
    return copy


def assistant_message(
    blocks: Sequence[Mapping[str, Any]],
    provider: str,
    model: str,
    replay_state: Any = None,
) -> Message:
    """The model's message of one step."""
    source: dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
    if replay_state is not None:
        source["replayState"] = replay_state
    return {"role": "assistant", "content": list(blocks), "source": source, "id": str(uuid.uuid4())}


def tool_result_message(call_id: str, content: Sequence[Any], is_error: bool) -> Message:
    """The user-role message carrying one tool call's result block."""
    return {
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": list(content),
                "isError": is_error,
            }
        ],
        "role": "user",
        "id": str(uuid.uuid4()),
    }
