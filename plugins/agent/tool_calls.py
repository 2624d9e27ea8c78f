"""The tool calls of one response (docs/agent-loop.md).

Calls run in groups taken in model order: an `exclusive` call alone, a run of `parallel` calls in
a rolling pool of at most `max_parallel_tool_calls`. Each call starts with its `tool/call` event
and its `prepare` stage (sequential, model order); only dispatches overlap. Results are committed
in model order (`finalize`, `finish`, `tool/result`, contexts → next-step). After an abort no call
starts; started calls drain and commit; unstarted ones get a synthetic call/result pair.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from plugins.llm import LlmError
from plugins.session.jsonutil import parse_arguments
from plugins.session.owned import append_owned
from plugins.tools import (
    ToolExecutionInput,
    ToolExecutionResult,
    aborted_before_dispatch_result,
    idempotency_key,
)

from .messages import tool_result_message

if TYPE_CHECKING:
    from framework import AbortSignal
    from plugins.tools.pipeline import PreparedCall, ToolScheduler

    from .agent import Agent


class _Call:
    """One tool-call block on its way to a committed `tool/result`."""

    __slots__ = ("arguments", "block", "started")

    def __init__(self, block: Mapping[str, Any]) -> None:
        self.block = block
        self.arguments = parse_arguments(block.get("arguments", ""))
        #: The `tool/call` seq and the prepared call, once the call has started.
        self.started: tuple[int, PreparedCall] | None = None


DUPLICATE_TOOL_CALL_ID = "DUPLICATE_TOOL_CALL_ID"


class _CallIds:
    """The tool call ids of a session's assistant messages, read incrementally from its log."""

    __slots__ = ("ids", "scanned")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.scanned = 0

    def update(self, events: Sequence[Mapping[str, Any]]) -> set[str]:
        for event in events[self.scanned :]:
            if event["type"] == "assistant/message":
                for block in event["data"]["message"]["content"]:
                    if block.get("type") == "tool-call":
                        self.ids.add(block["id"])
        self.scanned = len(events)
        return self.ids


_call_ids: weakref.WeakKeyDictionary[Agent, _CallIds] = weakref.WeakKeyDictionary()


def refuse_repeated_call_ids(agent: Agent, blocks: Sequence[Mapping[str, Any]]) -> None:
    """Raise `LlmError` `DUPLICATE_TOOL_CALL_ID` if a tool call of this response reuses an id
    of the session (or of the response itself): such a transcript is invalid for providers, and
    the call's idempotency key would name an earlier call (docs/tools-and-cancellation.md)."""
    known = _call_ids.setdefault(agent, _CallIds()).update(agent.session.events)
    fresh: set[str] = set()
    for block in blocks:
        call_id = block["id"]
        if call_id in known or call_id in fresh:
            where = "this session" if call_id in known else "this response"
            raise LlmError(
                f'the model reused tool call id "{call_id}", already used in {where}; '
                "the response was refused and its tool calls were not run",
                DUPLICATE_TOOL_CALL_ID,
            )
        fresh.add(call_id)


async def run_tool_calls(
    agent: Agent,
    turn: int,
    step: int,
    blocks: Sequence[Mapping[str, Any]],
    signal: AbortSignal,
    store: str,
) -> bool:
    """Run and commit every call; True if a result concludes the turn. Raises if aborted.

    `store` is the session store's identity: each call's idempotency key derives from it, the
    session id and the call id."""
    tools = agent.service.tools
    scheduler = tools.scheduler  # one service read per step (docs/performance.md)
    calls = [_Call(block) for block in blocks]
    concluded = False
    index = 0
    while index < len(calls):
        group = [calls[index]]
        if tools.execution_mode(group[0].block["name"], group[0].arguments, agent) == "parallel":
            while index + len(group) < len(calls):
                nxt = calls[index + len(group)]
                if tools.execution_mode(nxt.block["name"], nxt.arguments, agent) != "parallel":
                    break
                group.append(nxt)
        if len(group) == 1:
            ran = await _run_alone(agent, turn, step, group[0], signal, store, scheduler)
        else:
            limit = agent.service.config.max_parallel_tool_calls
            ran = await _run_group(agent, turn, step, group, limit, signal, store, scheduler)
        concluded = ran or concluded
        index += len(group)
    signal.throw_if_aborted()
    return concluded


async def _run_alone(
    agent: Agent,
    turn: int,
    step: int,
    call: _Call,
    signal: AbortSignal,
    store: str,
    scheduler: ToolScheduler,
) -> bool:
    """A group of one call: the stages of `_run_group` in the same order, in this task (no
    pool, no child tasks: the common case costs no task spawns)."""
    if signal.aborted:
        call_seq = _append_call(agent, turn, step, call)
        _append_result(agent, turn, step, call, call_seq, aborted_before_dispatch_result())
        return False
    call_seq = _append_call(agent, turn, step, call)
    prepared = await scheduler.prepare(_input(agent, call, signal, store))
    await scheduler.dispatch(prepared)
    return await _commit(agent, turn, step, call, call_seq, prepared, scheduler)


async def _run_group(
    agent: Agent,
    turn: int,
    step: int,
    group: list[_Call],
    limit: int,
    signal: AbortSignal,
    store: str,
    scheduler: ToolScheduler,
) -> bool:
    slots = anyio.Semaphore(limit)
    concluded = False

    #: Per call: set when its dispatch is over, or when it will never start.
    settled = {id(call): anyio.Event() for call in group}

    async def dispatch(call: _Call, prepared: PreparedCall) -> None:
        try:
            await scheduler.dispatch(prepared)
        finally:
            slots.release()
            settled[id(call)].set()

    async def start_all(tg: anyio.abc.TaskGroup) -> None:
        for position, call in enumerate(group):
            await slots.acquire()
            if signal.aborted:
                slots.release()
                for unstarted in group[position:]:
                    settled[id(unstarted)].set()
                return
            call_seq = _append_call(agent, turn, step, call)
            prepared = await scheduler.prepare(_input(agent, call, signal, store))
            call.started = (call_seq, prepared)
            tg.start_soon(dispatch, call, prepared)

    async with anyio.create_task_group() as tg:
        tg.start_soon(start_all, tg)
        for call in group:
            await settled[id(call)].wait()
            if call.started is None:
                call_seq = _append_call(agent, turn, step, call)
                _append_result(agent, turn, step, call, call_seq, aborted_before_dispatch_result())
                continue
            call_seq, prepared = call.started
            committed = await _commit(agent, turn, step, call, call_seq, prepared, scheduler)
            concluded = committed or concluded
    return concluded


def _input(agent: Agent, call: _Call, signal: AbortSignal, store: str) -> ToolExecutionInput:
    call_id = call.block["id"]
    return ToolExecutionInput(
        call_id=call_id,
        name=call.block["name"],
        arguments=call.arguments,
        signal=signal,
        agent=agent,
        idempotency_key=idempotency_key(store, agent.id, call_id),
    )


async def _commit(
    agent: Agent,
    turn: int,
    step: int,
    call: _Call,
    call_seq: int,
    prepared: PreparedCall,
    scheduler: ToolScheduler,
) -> bool:
    """Finalize, finish and log a dispatched call's result; True if it concludes the turn."""
    if prepared.deferred:
        return False  # its approval question stays open (docs/approval.md)
    await scheduler.finalize(prepared)
    result = await scheduler.finish(prepared)
    _append_result(agent, turn, step, call, call_seq, result)
    for context in result.additional_contexts:
        agent.inject(context)
    return result.concludes_turn


def _append_call(agent: Agent, turn: int, step: int, call: _Call) -> int:
    block = call.block  # a block of the logged assistant message: checked
    event = append_owned(
        agent.session,
        "tool/call",
        {
            "turn": turn,
            "step": step,
            "callId": block["id"],
            "name": block["name"],
            "arguments": block.get("arguments", ""),
        },
    )
    seq: int = event["seq"]
    return seq


def _append_result(
    agent: Agent, turn: int, step: int, call: _Call, call_seq: int, result: ToolExecutionResult
) -> None:
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": tool_result_message(call.block["id"], result.content, result.is_error),
    }
    if result.error is not None and result.error.info is not None:
        data["error"] = dict(result.error.info)
    if result.meta is not None:
        data["meta"] = result.meta
    agent.session.append("tool/result", data, surface_op="append", source_event_seqs=[call_seq])
