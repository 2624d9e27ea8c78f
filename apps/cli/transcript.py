"""`dsh show --messages` and the token usage `dsh show` reports.

The transcript is what the model receives on the session's next request: the system prompt the
last request carried and the messages derived from the balanced log's surface (repair texts of
an interrupted turn included). Token usage is summed per turn from the logged `usage` chunks,
an `assistant/message`'s own `usage` taking precedence for its step; it is read from the log, so
it survives any number of resumes (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.session import derive_messages
from plugins.session.jsonutil import dumps

from .summary import message_text, tool_result_text

Event = dict[str, Any]
COUNTS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens")


def system_prompt(events: Sequence[Event]) -> str | None:
    """The system prompt of the last `request/header`, None when no request was logged."""
    for event in reversed(events):
        if event["type"] == "request/header":
            system = event["data"]["header"].get("system")
            return system if isinstance(system, str) else None
    return None


def transcript_json(session_id: str, events: Sequence[Event]) -> dict[str, Any]:
    """`{"type":"transcript","sessionId","system","messages"}` for `--messages --json`."""
    return {
        "type": "transcript",
        "sessionId": session_id,
        "system": system_prompt(events),
        "messages": derive_messages(events),
    }


def transcript_lines(events: Sequence[Event]) -> Iterator[str]:
    """The transcript for a person: one paragraph per message, role first."""
    system = system_prompt(events)
    if system is not None:
        yield f"[system] {system}"
    for message in derive_messages(events):
        role = message.get("role")
        for block in message.get("content", ()):
            kind = block.get("type")
            if kind == "text":
                yield f"[{role}] {block.get('text', '')}"
            elif kind == "reasoning":
                yield f"[{role} reasoning] {block.get('text', '')}"
            elif kind == "tool-call":
                call = f"{block.get('name')} {block.get('arguments')}"
                yield f"[{role} tool call {block.get('id')}] {call}"
            elif kind == "tool-result":
                error = " error" if block.get("isError") else ""
                text = tool_result_text({"content": [block]})
                yield f"[tool result{error} {block.get('toolCallId')}] {text}"
            else:
                yield f"[{role} {kind}] {dumps(block)}"
        if not message.get("content"):
            yield f"[{role}] {message_text(message)}"


@dataclass(frozen=True)
class Usage:
    """Token counts per turn (turn → counts) and their total."""

    turns: dict[int, dict[str, int]]

    @property
    def total(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for counts in self.turns.values():
            for key, value in counts.items():
                total[key] = total.get(key, 0) + value
        return total

    def to_json(self) -> dict[str, Any]:
        return {
            "turns": [{"turn": turn, **counts} for turn, counts in self.turns.items()],
            "total": self.total,
        }

    def lines(self) -> list[str]:
        """E.g. `turn 0: 120 in, 35 out` per turn, then `total: ...` (nothing without usage)."""
        if not self.turns:
            return []
        lines = [f"turn {turn}: {_counts_text(c)}" for turn, c in self.turns.items()]
        return ["tokens:", *(f"  {line}" for line in lines), f"  total: {_counts_text(self.total)}"]


def _counts_text(counts: Mapping[str, int]) -> str:
    names = {
        "inputTokens": "in",
        "outputTokens": "out",
        "cacheReadTokens": "cache read",
        "cacheWriteTokens": "cache write",
        "reasoningTokens": "reasoning",
    }
    return ", ".join(f"{counts[key]:,} {names[key]}" for key in COUNTS if key in counts)


def usage_of(events: Sequence[Event]) -> Usage:
    """Sum each step's usage (its message's, else its last usage chunk) per turn."""
    steps: dict[tuple[int, int], Mapping[str, Any]] = {}
    for event in events:
        data = event.get("data")
        if not isinstance(data, dict):
            continue
        if event["type"] == "assistant/chunk" and data["chunk"].get("type") == "usage":
            steps[(data["turn"], data["step"])] = data["chunk"]["usage"]
        elif event["type"] == "assistant/message" and isinstance(data.get("usage"), dict):
            steps[(data["turn"], data["step"])] = data["usage"]
    turns: dict[int, dict[str, int]] = {}
    for (turn, _), usage in steps.items():
        counts = turns.setdefault(turn, {})
        for key in COUNTS:
            value = usage.get(key)
            if type(value) is int:
                counts[key] = counts.get(key, 0) + value
    return Usage(turns)
