"""The listeners: rules in `tools/pre-execute`, and in `agent/pre-step` the continuation of a
session whose turn ended blocked on an open question (docs/approval.md).

A call whose question stays open has a `tool/call` and an `approval/asked` but no `tool/result`:
its turn ends `blocked` at the next step boundary and no model request is made while the
question is open. The next turn resolves it before its first step: the call goes through the
pipeline again (pre-execute asks the same question, the answer is recorded, and an allowed call
runs once under the dispatch barrier), and its one `tool/result` is appended; the transcript is
balanced again before the model sees it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from plugins.agent import Reject
from plugins.agent.messages import tool_result_message
from plugins.session.jsonutil import parse_arguments
from plugins.tools import (
    Allow,
    Ask,
    Deny,
    ToolExecutionInput,
    ToolExecutionResult,
    idempotency_key,
)

from . import texts
from .log import DECIDED, Question
from .rules import judge

if TYPE_CHECKING:
    from plugins.agent import Agent, PreStep
    from plugins.tools import ToolExecution

    from .service import ApprovalService


def rules_listener(
    service: ApprovalService,
) -> Callable[[ToolExecution, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    """`tools/pre-execute`: after the rest of the chain allowed a call, apply the rules."""

    async def listener(exec: ToolExecution, next: Callable[[], Awaitable[Any]]) -> Any:
        decision = await next()
        if not isinstance(decision, Allow):
            return decision
        if exec.agent is not None:
            question = service.book(exec.agent.session).open_question(exec.call_id)
            if question is not None:
                return Ask(question.reason, decision.contexts)
        tool = service.ctx.tools.get(exec.name, exec.agent)
        if tool is None:
            return decision  # dispatch reports the unknown tool; there is nothing to run
        verdict = judge(service.config.rules, exec.name, exec.arguments, tool.read_only)
        if verdict.action == "deny":
            return Deny(verdict.reason or texts.denied(exec.name), decision.contexts)
        if verdict.action == "ask":
            return Ask(verdict.reason, decision.contexts)
        return decision

    return listener


def step_listener(
    service: ApprovalService,
) -> Callable[[PreStep, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    """`agent/pre-step`: continue calls left open by an earlier turn; while any question is
    open, end the turn `blocked` instead of asking the model."""

    async def listener(payload: PreStep, next: Callable[[], Awaitable[Any]]) -> Any:
        agent = payload.agent
        book = service.book(agent.session)
        open_questions = book.pending()
        if open_questions:
            for question in open_questions:
                if question.turn != payload.turn:
                    await _continue(service, agent, question, payload.signal)
            if book.update(agent.session.events).pending():
                return Reject("waiting for approval")
        return await next()

    return listener


async def _continue(
    service: ApprovalService, agent: Agent, question: Question, signal: Any
) -> None:
    session = agent.session
    call = question.call
    if call is None or question.call_seq is None:
        session.append(DECIDED, {"id": question.id, "outcome": "cancelled"})
        return
    scheduler = service.ctx.tools.scheduler
    store = await service.ctx.sessions.identity()
    prepared = await scheduler.prepare(
        ToolExecutionInput(
            call_id=call["callId"],
            name=call["name"],
            arguments=parse_arguments(call.get("arguments", "")),
            signal=signal,
            agent=agent,
            # The same key the call had in its own turn (docs/tools-and-cancellation.md).
            idempotency_key=idempotency_key(store, agent.id, call["callId"]),
        )
    )
    if prepared.deferred:
        return
    await scheduler.dispatch(prepared)
    await scheduler.finalize(prepared)
    result = await scheduler.finish(prepared)
    if service.book(session).open_question(call["callId"]) is not None:
        # Another pre-execute listener settled the call before the question was put again.
        session.append(DECIDED, {"id": question.id, "outcome": "cancelled"})
    _append_result(agent, call, question.call_seq, result)
    for context in result.additional_contexts:
        agent.inject(context)


def _append_result(agent: Agent, call: Any, call_seq: int, result: ToolExecutionResult) -> None:
    data: dict[str, Any] = {
        "turn": call["turn"],
        "step": call["step"],
        "message": tool_result_message(call["callId"], result.content, result.is_error),
    }
    if result.error is not None and result.error.info is not None:
        data["error"] = dict(result.error.info)
    if result.meta is not None:
        data["meta"] = result.meta
    agent.session.append("tool/result", data, surface_op="append", source_event_seqs=[call_seq])
