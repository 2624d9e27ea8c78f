"""Reading approval state out of a session log (pure): questions, decisions, remembered rules.

The three binding events are `approval/asked {id, toolName, callId?, reason?}`, `approval/decided
{id, outcome}` and `approval/policy {policy, source?}`; `approval/always {id, toolName}` is the
port-only "always allow this tool in this session" record, written with `ignorable: true`
(docs/approval.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ASKED = "approval/asked"
DECIDED = "approval/decided"
POLICY = "approval/policy"
ALWAYS = "approval/always"

Outcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
Policy = Literal["ask", "never"]

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Question:
    """One `approval/asked` and the tool call it guards (`call_seq` of its `tool/call`)."""

    id: str
    tool_name: str
    call_id: str | None
    reason: str | None
    seq: int
    turn: int | None
    call_seq: int | None = None
    call: Mapping[str, Any] | None = None

    @property
    def arguments(self) -> Any:
        """The call's raw `arguments` from its `tool/call` (None when unknown)."""
        return None if self.call is None else self.call.get("arguments")


@dataclass
class ApprovalLog:
    """What a log says about approvals; `update(events)` folds in more events (append-only)."""

    scanned: int = 0
    questions: dict[str, Question] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)
    always: set[str] = field(default_factory=set)
    policy: str | None = None
    answered_calls: set[str] = field(default_factory=set)
    calls: dict[str, tuple[int, Mapping[str, Any]]] = field(default_factory=dict)
    turn: int | None = None

    def update(self, events: Sequence[Event]) -> ApprovalLog:
        """Fold `events[self.scanned:]` in; returns self."""
        for event in events[self.scanned :]:
            self._fold(event)
        self.scanned = max(self.scanned, len(events))
        return self

    def add(self, event: Event) -> None:
        """Fold in the next event (a walk that reads each event once for several folds)."""
        self._fold(event)
        self.scanned += 1

    def _fold(self, event: Event) -> None:
        kind = event["type"]
        data = event["data"]
        if kind == "turn/start":
            self.turn = data.get("turn")
        elif kind == "tool/call":
            self.calls[data["callId"]] = (event["seq"], data)
        elif kind == "tool/result":
            self.answered_calls.add(data["message"]["source"]["callId"])
        elif kind == ASKED:
            call_id = data.get("callId")
            call = self.calls.get(call_id) if isinstance(call_id, str) else None
            self.questions[data["id"]] = Question(
                id=data["id"],
                tool_name=data["toolName"],
                call_id=call_id,
                reason=data.get("reason"),
                seq=event["seq"],
                turn=self.turn,
                call_seq=None if call is None else call[0],
                call=None if call is None else call[1],
            )
        elif kind == DECIDED:
            self.outcomes[data["id"]] = data["outcome"]
        elif kind == ALWAYS:
            self.always.add(data["toolName"])
        elif kind == POLICY:
            self.policy = data.get("policy")

    def open_question(self, call_id: str) -> Question | None:
        """The undecided question guarding `call_id`, if any."""
        for question in self.questions.values():
            if question.call_id == call_id and question.id not in self.outcomes:
                return question
        return None

    def pending(self) -> list[Question]:
        """Questions still waiting for an answer (undecided, their call without a result), in
        the order they were asked."""
        return [
            q
            for q in self.questions.values()
            if q.id not in self.outcomes and q.call_id not in self.answered_calls
        ]


def approval_log(events: Sequence[Event]) -> ApprovalLog:
    """The approval state of a whole log."""
    return ApprovalLog().update(events)


def pending_questions(events: Sequence[Event]) -> list[Question]:
    """The questions of `events` still waiting for an answer."""
    return approval_log(events).pending()
