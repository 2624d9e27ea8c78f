"""Crash repair: the closers that balance a log whose last turn never ended, and
the approval closer (docs/approval.md): open questions are cancelled first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .eventlog import plain_events
from .events import Event, closer_event

__all__ = [
    "NOT_STARTED",
    "TOOL_NOT_STARTED_ERROR",
    "TOOL_NOT_STARTED_TEXT",
    "TOOL_OUTCOME_UNKNOWN_ERROR",
    "TOOL_OUTCOME_UNKNOWN_TEXT",
    "UNKNOWN_OUTCOME",
    "TurnFold",
    "interrupted_turn_closers",
    "repair_code",
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

#: The `error.code` of a repair result whose call was recorded but has no durable result.
UNKNOWN_OUTCOME: str = TOOL_OUTCOME_UNKNOWN_ERROR["code"]
#: The `error.code` of a repair result whose call never became durable.
NOT_STARTED: str = TOOL_NOT_STARTED_ERROR["code"]


def repair_code(event: Mapping[str, Any]) -> str | None:
    """`TOOL_OUTCOME_UNKNOWN` / `TOOL_NOT_STARTED` for a repair `tool/result`, else None."""
    if event["type"] != "tool/result":
        return None
    error = event["data"].get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if code in (UNKNOWN_OUTCOME, NOT_STARTED) else None


class _Pending:
    __slots__ = ("call_seq", "step", "turn")

    def __init__(self, step: Any, turn: Any = None, call_seq: int | None = None) -> None:
        self.step = step
        self.turn = turn
        self.call_seq = call_seq


class _Approvals:
    """The approval closer's view of a log (docs/approval.md): questions without a decision
    are cancelled; a call whose question did not end `allowed-once` never ran (its body waits
    for a durable grant), and a call an earlier blocked turn left open gets its result here."""

    __slots__ = ("calls", "decided", "guarded", "questions", "results")

    def __init__(self) -> None:
        self.questions: dict[str, str | None] = {}
        self.decided: dict[str, str] = {}
        self.guarded: dict[str, str] = {}
        self.calls: dict[str, tuple[int, Any]] = {}
        self.results: set[str] = set()

    def fold(self, event: Event) -> None:
        kind = event["type"]
        data = event["data"]
        if kind == "approval/asked":
            call_id = data.get("callId")
            self.questions[data["id"]] = call_id
            if isinstance(call_id, str):
                self.guarded[call_id] = data["id"]
        elif kind == "approval/decided":
            self.decided[data["id"]] = data["outcome"]
        elif kind == "tool/call":
            self.calls[data["callId"]] = (event["seq"], data)
        elif kind == "tool/result":
            self.results.add(data["message"]["source"]["callId"])

    def undecided(self) -> list[str]:
        """Questions without a decision, in the order asked."""
        return [q for q in self.questions if q not in self.decided]

    def may_have_run(self, call_id: str) -> bool:
        """False when the call's question never allowed it (so its body never began)."""
        question = self.guarded.get(call_id)
        return question is None or self.decided.get(question) == "allowed-once"

    def unanswered_calls(self) -> dict[str, tuple[int, Any]]:
        """Guarded calls with a `tool/call` and no `tool/result`, by call id."""
        return {
            call_id: self.calls[call_id]
            for call_id in self.guarded
            if call_id in self.calls and call_id not in self.results
        }


def interrupted_turn_closers(events: Sequence[Event]) -> list[Event]:
    """The events that close an interrupted last turn: `approval/decided {"outcome":
    "cancelled"}` per open question, one `tool/result` per pending tool call (calls an earlier
    blocked turn left waiting for approval included), then `step/end` if a step is open, then
    `turn/end {"kind":"interrupted"}`. `[]` when no turn is open. Pure: reads `events` (only
    their `plain_events`: streamed chunks change nothing here), returns new events (seq after
    the last, time of the last)."""
    fold = TurnFold()
    for _, event in plain_events(events):
        fold.add(event)
    return fold.closers(events[-1] if events else None)


class TurnFold:
    """`interrupted_turn_closers` one event at a time: `add` each (valid) event in order, then
    `closers(last)` with the log's last event."""

    __slots__ = ("approvals", "open_step", "open_turn", "pending")

    def __init__(self) -> None:
        self.open_turn: Any = None
        self.open_step: Any = None
        self.pending: dict[str, _Pending] = {}
        self.approvals = _Approvals()

    def add(self, event: Event) -> None:
        pending = self.pending
        kind = event["type"]
        data = event["data"]
        self.approvals.fold(event)
        if kind == "turn/start":
            self.open_turn, self.open_step = data["turn"], None
            pending.clear()
        elif kind == "turn/end":
            self.open_turn = self.open_step = None
            pending.clear()
        elif kind == "step/start":
            self.open_step = data["step"]
        elif kind == "step/end":
            self.open_step = None
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

    def closers(self, last: Event | None) -> list[Event]:
        """The closers after `last` (None: an empty log), `[]` when no turn is open."""
        open_turn, open_step = self.open_turn, self.open_step
        pending, approvals = self.pending, self.approvals
        if open_turn is None or last is None:
            return []
        seq = last["seq"] + 1
        time = last["time"]
        closers: list[Event] = []
        for question_id in approvals.undecided():
            closers.append(
                closer_event(
                    "approval/decided", seq, time, {"id": question_id, "outcome": "cancelled"}
                )
            )
            seq += 1
        carried = {
            call_id: _Pending(data["step"], data["turn"], call_seq)
            for call_id, (call_seq, data) in approvals.unanswered_calls().items()
            if call_id not in pending
        }
        for call_id, call in [*carried.items(), *pending.items()]:
            started = call.call_seq is not None and approvals.may_have_run(call_id)
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
                                "text": TOOL_OUTCOME_UNKNOWN_TEXT
                                if started
                                else TOOL_NOT_STARTED_TEXT,
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
                    {
                        "turn": open_turn if call.turn is None else call.turn,
                        "step": call.step,
                        "message": message,
                        "error": dict(error),
                    },
                    surface_op="append",
                    source_event_seqs=[call.call_seq] if call.call_seq is not None else None,
                )
            )
            seq += 1
        if open_step is not None:
            closers.append(
                closer_event("step/end", seq, time, {"turn": open_turn, "step": open_step})
            )
            seq += 1
        closers.append(
            closer_event(
                "turn/end", seq, time, {"turn": open_turn, "reason": {"kind": "interrupted"}}
            )
        )
        return closers
