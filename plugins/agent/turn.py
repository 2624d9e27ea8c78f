"""One turn: claimed prompt → steps until the model stops → `turn/end` (docs/agent-loop.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from plugins.llm import LlmError
from plugins.session.owned import append_owned

from .hooks import (
    ERROR,
    PRE_STEP,
    TURN_STOPPING,
    USER,
    AgentErrorEvent,
    Enter,
    PreStep,
    Reject,
    TurnStopping,
)
from .step import run_step

if TYPE_CHECKING:
    from framework import AbortSignal

    from .agent import Agent
    from .inbox import Message

logger = logging.getLogger("dsh.agent")


async def run_turn(
    agent: Agent, turn: int, messages: list[Message], signal: AbortSignal
) -> dict[str, Any]:
    """Run `turn`, whose `turn/start` and first claim are already in the log; returns the reason.

    `turn/end` is appended unless the task is cancelled from outside (then the log stays open
    like after a crash and repair closes it).
    """
    reason: dict[str, Any]
    try:
        reason = await _steps(agent, turn, messages, signal)
    except Exception as error:
        if signal.aborted:
            cause = signal.reason
            reason = {"kind": "aborted", "reason": cause if isinstance(cause, dict) else USER}
        else:
            failure = (
                error.failure
                if isinstance(error, LlmError)
                else {
                    "message": str(error) or type(error).__name__,
                    "code": "UNKNOWN",
                }
            )
            reason = {"kind": "error", "error": dict(failure)}
            # The failure is data (turn/end, agent/error); apps report it, the log only traces it.
            logger.info('agent "%s": turn %d failed: %s', agent.id, turn, failure["message"])
            agent.ctx.emit(ERROR, AgentErrorEvent(agent, error))
    agent.session.append("turn/end", {"turn": turn, "reason": reason})
    return reason


async def _steps(
    agent: Agent, turn: int, messages: list[Message], signal: AbortSignal
) -> dict[str, Any]:
    inbox = agent.inbox
    max_tokens = False
    ended = False
    step = 1
    while True:
        if step > 1:
            messages = inbox.claim("next-step")
        decision = await _pre_step(agent, PreStep(agent, messages, turn, step, signal))
        signal.throw_if_aborted()
        if isinstance(decision, Reject):
            return {"kind": "blocked"}
        messages = decision.messages
        if not messages and (ended or step == 1):
            break
        session = agent.session
        append_owned(session, "step/start", {"turn": turn, "step": step})
        for message in messages:
            session.append("user/message", message, surface_op="append")
        try:
            outcome = await run_step(agent, turn, step, signal)
        except Exception:
            append_owned(session, "step/end", {"turn": turn, "step": step})
            raise
        append_owned(session, "step/end", {"turn": turn, "step": step})
        max_tokens = max_tokens or outcome == "max-tokens"
        ended = outcome != "continue"
        if ended and not inbox.next_step:
            await agent.ctx.serial(TURN_STOPPING, TurnStopping(agent, turn, signal))
            if not inbox.next_step:
                break
        step += 1
    return {"kind": "max-tokens"} if max_tokens else {"kind": "completed"}


async def _pre_step(agent: Agent, payload: PreStep) -> Enter | Reject:
    async def enter() -> Enter:
        return Enter(payload.messages)

    return await agent.ctx.waterfall(PRE_STEP, payload, inner=enter)
