"""What state a stored session is in (running, waiting, interrupted, idle) and its title.

`dsh sessions` shows and filters by the state; `dsh prune` never removes a session that is
running or waiting (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from plugins.session.eventlog import plain_events
from plugins.session.repair import TurnFold, interrupted_turn_closers
from plugins.session_persistence import Owner
from plugins.tool_approval import ApprovalLog, pending_questions

from .summary import last_turn_reason, message_text

Event = dict[str, Any]
State = Literal["running", "waiting", "interrupted", "idle"]
STATES: tuple[State, ...] = ("running", "waiting", "interrupted", "idle")

#: How many characters of the first prompt stand for an untitled session.
PREVIEW_CHARS = 60


def _state(waiting: bool, owner: Owner | None, interrupted: Callable[[], bool]) -> State:
    """`waiting` (an approval is pending), `running` (another process holds it), `interrupted`
    (its last turn was cut short by a crash, repaired or not yet) or `idle`."""
    if waiting:
        return "waiting"
    if owner is not None:
        return "running"
    return "interrupted" if interrupted() else "idle"


def state_of(events: Sequence[Event], owner: Owner | None) -> State:
    """The session's state (`_state`) from its events and its live writer."""

    def interrupted() -> bool:
        reason = last_turn_reason(events)
        closers = interrupted_turn_closers(list(events))
        return bool(closers) or (reason or {}).get("kind") == "interrupted"

    return _state(bool(pending_questions(events)), owner, interrupted)


@dataclass(frozen=True, slots=True)
class Glance:
    """What a listing row shows of a log: turns started, the last `turn/end` reason (None
    while another process runs it), title, approvals waiting and state."""

    turns: int
    last_reason: dict[str, Any] | None
    title: str | None
    waiting: int
    state: State


def glance(events: Sequence[Event], owner: Owner | None) -> Glance:
    """The `Glance` of `events` (a log another process `owner` runs, or a balanced one when
    None), in one walk that decodes each event once and skips the members of packed chunk rows
    (`assistant/chunk` events, which none of these facts read)."""
    turns = 0
    reason: dict[str, Any] | None = None
    title = prompt = None
    approvals = ApprovalLog()
    fold = TurnFold() if owner is None else None
    for _, event in plain_events(events):
        kind = event["type"]
        approvals.add(event)
        if fold is not None:
            fold.add(event)
        if kind == "turn/start":
            turns += 1
        elif kind == "turn/end" and fold is not None:
            reason = event["data"]["reason"]
        elif kind == "session/title":
            named = event["data"].get("title")
            if isinstance(named, str) and named.strip():
                title = named.strip()
        elif kind == "user/message" and prompt is None:
            prompt = _preview(event) or None
    waiting = len(approvals.pending())

    def interrupted() -> bool:
        assert fold is not None  # `_state` asks only when no owner runs it
        closers = fold.closers(events[-1] if events else None)
        return bool(closers) or (reason or {}).get("kind") == "interrupted"

    return Glance(turns, reason, title or prompt, waiting, _state(waiting > 0, owner, interrupted))


def _preview(event: Event) -> str:
    """A `user/message`'s text on one line, cut to `PREVIEW_CHARS` ("" when it has none)."""
    text = " ".join(message_text(event["data"]).split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
