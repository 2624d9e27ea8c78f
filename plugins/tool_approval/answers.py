"""What an answerer is asked and what it may answer (docs/approval.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

AnswerKind = Literal["once", "always", "reject", "later"]


@dataclass(frozen=True)
class ApprovalRequest:
    """One question to a person: which call, with which arguments, and why it needs a yes."""

    id: str
    session_id: str
    call_id: str
    tool_name: str
    arguments: Any
    reason: str | None


@dataclass(frozen=True)
class Answer:
    """An answerer's reply. `once` allows this call, `always` this tool for the rest of the
    session, `reject` refuses (with an optional `reason` the model sees), `later` leaves the
    question open: the turn ends `blocked` and the answer comes in a later process."""

    kind: AnswerKind
    reason: str | None = None

    @classmethod
    def once(cls) -> Answer:
        return cls("once")

    @classmethod
    def always(cls) -> Answer:
        return cls("always")

    @classmethod
    def reject(cls, reason: str | None = None) -> Answer:
        return cls("reject", reason or None)

    @classmethod
    def later(cls) -> Answer:
        return cls("later")


Answerer = Callable[[ApprovalRequest], Awaitable[Answer | None]]
"""`async answerer(request) -> Answer | None`; None passes the question to the next answerer."""
