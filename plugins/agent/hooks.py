"""Payloads of the agent-scoped hooks and live events, and the decisions hooks return.

Waterfall and serial listeners receive one payload object (`listener(payload, next)` for
waterfalls); `payload.agent` is the agent the event belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

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
