"""Crash repair: the closers that balance a log whose last turn never ended (spec 02 §3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .events import Event, closer_event

__all__ = [
    "TOOL_NOT_STARTED_ERROR",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN_ERROR",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "interrupted_turn_closers",
]

TOOL_NOT_STARTED_ERROR = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
TOOL_NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. "
    "Retry it if it is still needed."
)
TOOL_OUTCOME_UNKNOWN_ERROR = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
TOOL_OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)


class _Pending:
    __slots__ = ("call_seq", "step")

    def __init__(self, step: Any) -> None:
        self.step = step
        self.call_seq: int | None = None


def interrupted_turn_closers(events: Sequence[Event]) -> list[Event]:
    """The events that close an interrupted last turn: one `tool/result` per pending tool call,
    then `step/end` if a step is open, then `turn/end {"kind":"interrupted"}`. `[]` when no turn
    is open. Pure: reads `events`, returns new events (seq after the last, time of the last)."""
    open_turn: Any = None
    open_step: Any = None
    pending: dict[str, _Pending] = {}
    for event in events:
        kind = event["type"]
        data = event["data"]
        if kind == "turn/start":
            open_turn, open_step = data["turn"], None
            pending.clear()
        elif kind == "turn/end":
            open_turn = open_step = None
            pending.clear()
        elif kind == "step/start":
            open_step = data["step"]
        elif kind == "step/end":
            open_step = None
            pending.clear()
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    pending[block["id"]] = _Pending(data["step"])
        elif kind == "tool/call":
            call = pending.get(data["callId"])
            if call is not None:
                call.call_seq = event["seq"]
        elif kind == "tool/result":
            pending.pop(data["message"]["source"]["callId"], None)
    if open_turn is None:
        return []
    last = events[-1]
    seq = last["seq"] + 1
    time = last["time"]
    closers: list[Event] = []
    for call_id, call in pending.items():
        started = call.call_seq is not None
        message = {
            "id": f"interrupted-tool-result-{call_id}-{seq}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "isError": True,
                    "content": [
                        {
                            "type": "text",
                            "text": TOOL_OUTCOME_UNKNOWN_TEXT if started else TOOL_NOT_STARTED_TEXT,
                        }
                    ],
                }
            ],
        }
        error = TOOL_OUTCOME_UNKNOWN_ERROR if started else TOOL_NOT_STARTED_ERROR
        closers.append(
            closer_event(
                "tool/result",
                seq,
                time,
                {"turn": open_turn, "step": call.step, "message": message, "error": dict(error)},
                surface_op="append",
                source_event_seqs=[call.call_seq] if call.call_seq is not None else None,
            )
        )
        seq += 1
    if open_step is not None:
        closers.append(closer_event("step/end", seq, time, {"turn": open_turn, "step": open_step}))
        seq += 1
    closers.append(
        closer_event("turn/end", seq, time, {"turn": open_turn, "reason": {"kind": "interrupted"}})
    )
    return closers
