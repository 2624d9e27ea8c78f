"""The agent-scoped events (declarations at the end), their payloads and the decisions hooks
return.

Waterfall and serial listeners receive one payload object (`listener(payload, next)` for
waterfalls); `payload.agent` is the agent the event belongs to. Every event is dispatched through
the agent's scoped context (docs/concepts.md, "Scoped events").
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from framework import Emit, Serial, Waterfall

if TYPE_CHECKING:
    from framework.signal import AbortSignal
    from plugins.llm import RetryPolicy

    from .agent import Agent

Message = dict[str, Any]
CancelCause = dict[str, Any]
"""Why a turn aborted: `{"kind": "user"|"parent"|"disposed"}` or `{"kind": "hook", "reason"}`."""

USER: CancelCause = {"kind": "user"}
PARENT: CancelCause = {"kind": "parent"}
DISPOSED: CancelCause = {"kind": "disposed"}


@dataclass(frozen=True)
class Enter:
    """`agent/pre-step` decision: run the step with these claimed messages (the default)."""

    messages: list[Message] = field(default_factory=list)


@dataclass(frozen=True)
class Reject:
    """`agent/pre-step` decision: do not run the step; the turn ends `blocked`."""

    reason: str | None = None


@dataclass(frozen=True)
class Retry:
    """`agent/request-error` decision: send the same step's request again."""


@dataclass(frozen=True)
class PreStep:
    """`agent/pre-step` waterfall payload: the messages claimed for `step` of `turn`."""

    agent: Agent
    messages: list[Message]
    turn: int
    step: int
    signal: AbortSignal


@dataclass(frozen=True)
class TurnStopping:
    """`agent/turn-stopping` serial payload: the turn would end; listeners may queue a step."""

    agent: Agent
    turn: int
    signal: AbortSignal


@dataclass(frozen=True)
class RequestFailed:
    """`agent/request-error` serial payload: the request ended with a finish `error`/`aborted`."""

    agent: Agent
    turn: int
    step: int
    provider: str
    failure: dict[str, Any]
    retry_policy: RetryPolicy | None
    signal: AbortSignal


@dataclass
class AgentRequest:
    """`agent/request` waterfall payload; the waterfall returns the call config to use.

    `config` is the call config JSON (`provider`, `model`, `maxTokens`, ...); a listener may
    return a changed copy from `next()`'s result.
    """

    agent: Agent
    turn: int
    step: int
    config: dict[str, Any]


@dataclass(frozen=True)
class SessionStart:
    """`agent/session-start`: the agent's session became live."""

    agent: Agent
    source: Literal["startup", "resume"]


@dataclass(frozen=True)
class AgentErrorEvent:
    """`agent/error`: a turn failed, or the idle checkpoint could not be written."""

    agent: Agent
    error: BaseException


@dataclass(frozen=True)
class InboxChange:
    """`agent/inbox/inserted|claimed|discarded`: messages entered or left one inbox list."""

    agent: Agent
    target: Literal["next-turn", "next-step"]
    messages: list[Message]


# -- declarations ---------------------------------------------------------------------------

PRE_STEP: Waterfall[PreStep, Awaitable[Enter | Reject]] = Waterfall(
    "agent/pre-step",
    returns=(Enter, Reject),
    awaits=True,
    error="agent/pre-step must return Enter or Reject, got {got}",
)
"""`(payload, next)` before each step: run it with these messages, or end the turn."""

REQUEST: Waterfall[AgentRequest, Awaitable[dict[str, Any]]] = Waterfall(
    "agent/request",
    returns=dict,
    awaits=True,
    error="agent/request must return a call config dict, got {got}",
)
"""`(payload, next)` → the call config of the step's model request (routing)."""

REQUEST_ERROR: Serial[RequestFailed, Retry] = Serial("agent/request-error")
"""`(payload)` after a failed request: `Retry()` sends it again; anything else fails the step."""

TURN_STOPPING: Serial[TurnStopping, object] = Serial("agent/turn-stopping")
"""`(payload)` when the turn would end: a listener may queue a next-step message."""

AGENT_CREATED: Emit[Agent] = Emit("agent/created")
"""`(agent)`: an agent was created or resumed."""

SESSION_START: Emit[SessionStart] = Emit("agent/session-start")
"""`(payload)`: the agent's session became live."""

STATUS: Emit[Agent] = Emit("agent/status")
"""`(agent)`: `agent.status` changed."""

ERROR: Emit[AgentErrorEvent] = Emit("agent/error")
"""`(payload)`: a turn failed, or the idle checkpoint could not be written."""

AGENT_DISPOSED: Emit[Agent] = Emit("agent/disposed")
"""`(agent)`: the agent was disposed."""

INBOX_INSERTED: Emit[InboxChange] = Emit("agent/inbox/inserted")
INBOX_CLAIMED: Emit[InboxChange] = Emit("agent/inbox/claimed")
INBOX_DISCARDED: Emit[InboxChange] = Emit("agent/inbox/discarded")
"""`(payload)`: messages entered or left one inbox list."""

INBOX_EVENTS = {e.name: e for e in (INBOX_INSERTED, INBOX_CLAIMED, INBOX_DISCARDED)}
