"""One-call runs: `agents.run(prompt)` and `agents.stream(prompt)` (see docs/python-api.md).

Both open the session's agent (`agents.open`: the live one, a stored session resumed, or a new
session), send the prompt with `followup`, follow that turn through the session's events until
the agent is idle again, and flush the session once more: a turn whose end could not be stored
is reported as `SESSION_NOT_DURABLE`, never as what the turn said. The agent stays open (owned
by the caller's plugin, like `agents.create`), so the next call on the same session continues
the conversation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import anyio

from plugins.session.hooks import EVENT

from .errors import AgentError
from .hooks import PARENT, STATUS, CancelCause
from .reasons import leaf, not_durable
from .results import ProgressItem, RunResult, StreamItem, TurnEnd, TurnFold, find_call

if TYPE_CHECKING:
    from framework import AbortSignal

    from .agent import Agent
    from .options import AgentOptions
    from .service import AgentsService, Setup

log = logging.getLogger("dsh.agent")

#: What `run()` and `stream()` send: a prompt's text, or a whole user message.
Prompt = str | Mapping[str, Any]


class RunOptions(TypedDict, total=False):
    """Keyword arguments of `agents.run()` and `agents.stream()`.

    `session`: the session id (None: a new session; an unknown id: a new session with that id).
    `agent_options`, `setup`: as for `agents.create`, used only when the call opens the agent
    (not for an agent already open); `meta`: header fields of a new session. `signal`: aborting
    it cancels the turn, with the abort reason as the cancel cause when it is one
    (`{"kind": ...}`), else `{"kind": "parent"}`.
    """

    session: str | None
    agent_options: AgentOptions | None
    setup: Setup | None
    meta: Mapping[str, Any] | None
    signal: AbortSignal | None


class StreamOptions(RunOptions, total=False):
    """Keyword arguments of `agents.stream()`: those of `run()`, and `progress` (also yield the
    progress items: `StepStart`, `ToolCallStart`, `BlockEnd`, `MessageEnd`, `RetryScheduled`)."""

    progress: bool


async def run_turn_to_idle(
    service: AgentsService, prompt: Prompt, **options: Unpack[RunOptions]
) -> RunResult:
    """`agents.run()`: the whole turn, returned once the agent is idle."""
    result: RunResult | None = None
    async with aclosing(stream_turn(service, prompt, **options)) as items:
        async for item in items:
            if isinstance(item, TurnEnd):
                result = item.result
    assert result is not None, "a turn stream ends with TurnEnd or raises"
    return result


async def stream_turn(
    service: AgentsService,
    prompt: Prompt,
    *,
    session: str | None = None,
    agent_options: AgentOptions | None = None,
    setup: Setup | None = None,
    meta: Mapping[str, Any] | None = None,
    signal: AbortSignal | None = None,
    progress: bool = False,
) -> AsyncGenerator[StreamItem, None]:
    """`agents.stream()`: the turn's items as they happen, `TurnEnd` last.

    Leaving the iteration early (break, an exception, cancellation) cancels the turn with
    `{"kind": "parent"}`.
    """
    if signal is not None:
        signal.throw_if_aborted()
    opened = await service.open(session, agent_options=agent_options, setup=setup, meta=meta)
    agent = opened.agent
    if agent.status != "idle":
        raise AgentError(
            f'agent "{agent.id}" is {agent.status}: run() and stream() start a turn on an idle '
            "agent (wait with agent.when_idle(), or queue with agent.followup())",
            "AGENT_BUSY",
        )
    # Prompts already queued run first, one turn each; the stream follows this prompt's turn.
    queued = len(agent.inbox.next_turn)
    send, receive = anyio.create_memory_object_stream[Mapping[str, Any] | None](math.inf)

    def on_event(live: Any, event: Mapping[str, Any]) -> None:
        if live.id == agent.id:
            send.send_nowait(event)

    def on_status(changed: Agent) -> None:
        if changed is agent and changed.status != "running":
            send.send_nowait(None)  # idle (or disposed): nothing more comes

    fold = TurnFold(agent.id, lambda call_id: find_call(agent.session.events, call_id), skip=queued)
    ended = False
    off_event = service.ctx.on(EVENT, on_event)
    off_status = service.ctx.on(STATUS, on_status)
    unlink = None
    try:
        agent.followup(prompt)
        if signal is not None:  # after the turn started: an abort so far cancels it at once
            unlink = signal.add_listener(lambda reason: agent.cancel(_cause(reason)))
        while (event := await receive.receive()) is not None:
            for item in fold.add(event):
                if progress or not isinstance(item, ProgressItem):
                    yield item
        if fold.result is None:
            raise AgentError(
                f'agent "{agent.id}" went idle without ending its turn (see agent/error)',
                "TURN_NOT_ENDED",
            )
        ended = True
        yield TurnEnd(await _durable(service, agent, fold.result))
    finally:
        off_event()
        off_status()
        if unlink is not None:
            unlink()
        send.close()
        receive.close()
        if not ended and _running(agent):
            agent.cancel(PARENT)


async def _durable(service: AgentsService, agent: Agent, result: RunResult) -> RunResult:
    """Flush the session once more after the turn (a no-op when nothing persists): `result`
    when everything it appended, its `turn/end` included, is durable, else `result` with the
    `SESSION_NOT_DURABLE` reason."""
    try:
        await service.sessions.flush(agent.session)
    except Exception as error:
        log.debug('final flush of "%s" failed', agent.id, exc_info=error)
        return replace(result, reason=not_durable(result.reason, leaf(error)))
    return result


def _running(agent: Agent) -> bool:
    """Read `agent.status` afresh (it changes across awaits)."""
    return agent.status == "running"


def _cause(reason: object) -> CancelCause:
    if isinstance(reason, Mapping) and isinstance(reason.get("kind"), str):
        return dict(reason)
    return PARENT
