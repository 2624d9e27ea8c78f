"""Builders for the messages the loop persists, in the original harness's key order."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from plugins.session.jsonutil import snapshot

Message = dict[str, Any]

#: Random bytes for message ids, 16 per id, read from the OS 256 ids at a time: one
#: `os.urandom` per id (what `uuid.uuid4` does) costs a system call and lets the I/O threads
#: take the GIL mid-step. A forked child drops its copy.
_RANDOM: deque[bytes] = deque()
_BATCH = 16 * 256
_VERSION_4 = 0x4000 << 64 | 0x8000 << 48  # version 4, RFC 4122 variant
_VERSION_MASK = ~(0xF000 << 64 | 0xC000 << 48)
os.register_at_fork(after_in_child=_RANDOM.clear)


def new_id() -> str:
    """A random (version 4) UUID, written like `str(uuid.uuid4())`."""
    try:
        raw = _RANDOM.popleft()
    except IndexError:
        batch = os.urandom(_BATCH)
        _RANDOM.extend(batch[start : start + 16] for start in range(16, _BATCH, 16))
        raw = batch[:16]
    text = ((int.from_bytes(raw) & _VERSION_MASK) | _VERSION_4).to_bytes(16).hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def user_message(message: str | Mapping[str, Any]) -> Message:
    """A user message: text becomes one text block; a mapping is checked, copied and given an id.

    A mapping must have `role` "user" and a `content` list; `source` defaults to the user.
    """
    if isinstance(message, str):
        return {
            "content": [{"type": "text", "text": message}],
            "source": {"kind": "user"},
            "role": "user",
            "id": new_id(),
        }
    if not isinstance(message, Mapping):
        raise TypeError(f"an inbox message must be a str or a message mapping, got {message!r}")
    if message.get("role") != "user":
        raise ValueError(f'an inbox message must have role "user", got {message.get("role")!r}')
    if not isinstance(message.get("content"), list):
        raise ValueError("an inbox message must have a content list")
    copy: Message = snapshot(dict(message))
    copy.setdefault("source", {"kind": "user"})
    copy.setdefault("id", new_id())
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
    return {"role": "assistant", "content": list(blocks), "source": source, "id": new_id()}


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
        "id": new_id(),
    }
