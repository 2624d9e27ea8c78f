"""`agents.open()`: the session's agent, and what opening it did (docs/python-api.md).

Opening finds the live agent of a session, or resumes the stored session (its load repairs a
turn a crash interrupted), or creates a new session. `Opened` tells which, how many repair
closers the load appended (by kind) and what bytes a repair cut from the log and kept beside it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from plugins.session.repair import NOT_STARTED, UNKNOWN_OUTCOME, repair_code
from plugins.session_persistence import SessionNotFoundError

from .handle import AgentHandle

if TYPE_CHECKING:
    from plugins.session_persistence import SessionPersistenceService, SetAside

    from .options import AgentOptions
    from .service import AgentsService, Setup

Event = Mapping[str, Any]

How = Literal["created", "resumed", "live"]


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


@dataclass(frozen=True)
class Repairs:
    """Crash-repair closers found in a run of events: tool calls whose outcome is unknown or
    that never started, the turns closed as interrupted, the approval questions cancelled (their
    calls are among `not_started`)."""

    unknown: int = 0
    not_started: int = 0
    turns: tuple[int, ...] = ()
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


def _is_interrupted_end(event: Event) -> bool:
    """A `turn/end {"kind":"interrupted"}` (only repair writes one)."""
    return event["type"] == "turn/end" and bool(
        event["data"]["reason"].get("kind") == "interrupted"
    )


def _is_cancelled_approval(event: Event) -> bool:
    """An `approval/decided {"outcome":"cancelled"}` (repair writes one per open question)."""
    return event["type"] == "approval/decided" and bool(event["data"].get("outcome") == "cancelled")


def repairs_in(events: Sequence[Event]) -> Repairs:
    """Count the repair closers among `events`."""
    codes = [repair_code(event) for event in events]
    turns = tuple(e["data"]["turn"] for e in events if _is_interrupted_end(e))
    approvals = sum(1 for event in events if _is_cancelled_approval(event))
    return Repairs(codes.count(UNKNOWN_OUTCOME), codes.count(NOT_STARTED), turns, approvals)


@dataclass(frozen=True)
class Opened(AgentHandle):
    """An open agent (an `AgentHandle`) and what opening it did.

    `how`: `created` (a new session), `resumed` (loaded from storage) or `live` (the agent was
    already open). `repairs`: the closers the load appended (empty unless resumed).
    `set_aside`: what a repair of this load cut from the log and kept beside it.
    """

    how: How = "created"
    repairs: Repairs = Repairs()
    set_aside: tuple[SetAside, ...] = ()

    @property
    def session_id(self) -> str:
        """The session's id (the agent's id)."""
        return self.agent.id

    @property
    def resumed(self) -> bool:
        """Whether the session was loaded from storage."""
        return self.how == "resumed"


def new_session_id() -> str:
    """A readable unique id: `s-<yyyymmdd>-<6 hex>`."""
    return f"s-{time.strftime('%Y%m%d')}-{secrets.token_hex(3)}"


async def resume_or_create(
    service: AgentsService,
    session: str | None,
    *,
    agent_options: AgentOptions | None,
    setup: Setup | None,
    meta: Mapping[str, Any] | None,
    create: bool,
) -> Opened:
    """`agents.open()` for a session with no live agent: the stored session resumed, else
    (when `create`) a new session; without `create`, an id naming nothing raises
    `SessionNotFoundError`."""
    persistence: SessionPersistenceService | None = service.ctx.get("sessionPersistence")
    if session is not None and persistence is not None:
        stored = await _stored_count(persistence, session)
        if stored is not None:
            handle = await service.resume(session, agent_options=agent_options, setup=setup)
            return Opened(
                handle.agent,
                handle.dispose,
                "resumed",
                repairs_in(handle.agent.session.events[stored:]),
                tuple(persistence.set_aside(session)),
            )
    if not create:
        raise SessionNotFoundError(str(session))
    handle = await service.create(
        session if session is not None else new_session_id(),
        meta=meta,
        agent_options=agent_options,
        setup=setup,
    )
    return Opened(handle.agent, handle.dispose, "created")


async def _stored_count(persistence: SessionPersistenceService, session: str) -> int | None:
    """How many events `persistence` holds for `session` (None: nothing is stored)."""
    try:
        events = await persistence.read_from(session, 0)
    except SessionNotFoundError:
        return None
    return len(events)
