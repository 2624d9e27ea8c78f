"""What state a stored session is in (running, waiting, interrupted, idle) and its title.

`dsh sessions` shows and filters by the state; `dsh prune` never removes a session that is
running or waiting (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence import Owner
from plugins.tool_approval import pending_questions

from .summary import last_turn_reason, message_text

Event = dict[str, Any]
State = Literal["running", "waiting", "interrupted", "idle"]
STATES: tuple[State, ...] = ("running", "waiting", "interrupted", "idle")

#: How many characters of the first prompt stand for an untitled session.
PREVIEW_CHARS = 60


def state_of(events: Sequence[Event], owner: Owner | None) -> State:
    """`waiting` (an approval is pending), `running` (another process holds it), `interrupted`
    (its last turn was cut short by a crash, repaired or not yet) or `idle`."""
    if pending_questions(events):
        return "waiting"
    if owner is not None:
        return "running"
    reason = last_turn_reason(events)
    if interrupted_turn_closers(list(events)) or (reason or {}).get("kind") == "interrupted":
        return "interrupted"
    return "idle"


def title_of(events: Sequence[Event]) -> str | None:
    """The last `session/title`, else the first prompt cut to `PREVIEW_CHARS`, else None."""
    for event in reversed(events):
        if event["type"] == "session/title":
            title = event["data"].get("title")
            if isinstance(title, str) and title.strip():
                return title.strip()
    for event in events:
        if event["type"] == "user/message":
            text = " ".join(message_text(event["data"]).split())
            if text:
                return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return None
