"""Facts about a session log a person wants at a glance: turns, outcome, crash repairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.session.jsonutil import dumps

Event = Mapping[str, Any]

UNKNOWN_OUTCOME = "TOOL_OUTCOME_UNKNOWN"
NOT_STARTED = "TOOL_NOT_STARTED"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def repair_code(event: Event) -> str | None:
    """`TOOL_OUTCOME_UNKNOWN` / `TOOL_NOT_STARTED` for a repair `tool/result`, else None."""
    if event["type"] != "tool/result":
        return None
    error = event["data"].get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if code in (UNKNOWN_OUTCOME, NOT_STARTED) else None


def is_interrupted_end(event: Event) -> bool:
    """A `turn/end {"kind":"interrupted"}` (only repair writes one)."""
    return event["type"] == "turn/end" and bool(
        event["data"]["reason"].get("kind") == "interrupted"
    )


@dataclass(frozen=True)
class Repairs:
    """Crash-repair closers found in a run of events."""

    unknown: int = 0
    not_started: int = 0
    turns: tuple[int, ...] = ()
    #: Approval questions cancelled (their calls are among `not_started`).
    approvals: int = 0

    def __bool__(self) -> bool:
        return bool(self.unknown or self.not_started or self.turns or self.approvals)

    def to_json(self) -> dict[str, Any]:
        """`{"unknownOutcome", "notStarted", "interruptedTurns", "cancelledApprovals"}`."""
        return {
            "unknownOutcome": self.unknown,
            "notStarted": self.not_started,
            "interruptedTurns": list(self.turns),
            "cancelledApprovals": self.approvals,
        }

    def describe(self) -> str:
        """E.g. `1 tool call with unknown outcome, turn 1 closed as interrupted`."""
        parts = []
        if self.unknown:
            parts.append(_plural(self.unknown, "tool call", "tool calls") + " with unknown outcome")
        if self.approvals:
            parts.append(
                "1 approval was pending; the call was not run"
                if self.approvals == 1
                else f"{self.approvals} approvals were pending; the calls were not run"
            )
        not_started = max(0, self.not_started - self.approvals)
        if not_started:
            parts.append(_plural(not_started, "tool call", "tool calls") + " not started")
        if self.turns:
            numbers = ", ".join(str(t) for t in self.turns)
            parts.append(f"turn {numbers} closed as interrupted")
        return ", ".join(parts)


def repairs_in(events: Sequence[Event]) -> Repairs:
    """Count the repair closers among `events`."""
    codes = [repair_code(event) for event in events]
    turns = tuple(e["data"]["turn"] for e in events if is_interrupted_end(e))
    approvals = sum(1 for event in events if is_cancelled_approval(event))
    return Repairs(codes.count(UNKNOWN_OUTCOME), codes.count(NOT_STARTED), turns, approvals)


def is_cancelled_approval(event: Event) -> bool:
    """An `approval/decided {"outcome":"cancelled"}` (repair writes one per open question)."""
    return event["type"] == "approval/decided" and bool(event["data"].get("outcome") == "cancelled")


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


def reason_text(reason: Mapping[str, Any] | None) -> str:
    """`completed`, `aborted (user)`, `error: <message> (<code>)`, `interrupted`, ..."""
    if reason is None:
        return "-"
    kind = str(reason.get("kind"))
    if kind == "aborted":
        cause = reason.get("reason")
        cause_kind = cause.get("kind") if isinstance(cause, dict) else None
        return f"aborted ({cause_kind})" if cause_kind else "aborted"
    if kind == "error":
        failure = reason.get("error")
        if isinstance(failure, dict):
            return f"error: {failure.get('message')} ({failure.get('code')})"
    return kind


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
                return "".join(
                    part.get("text", "") if part.get("type") == "text" else dumps(part)
                    for part in inner
                )
    return ""


def tool_result_is_error(message: Mapping[str, Any]) -> bool:
    """Whether the tool result message reports a failure."""
    return any(b.get("isError") is True for b in message.get("content", ()))
