"""One-call runs: `agents.run(prompt)` and `agents.stream(prompt)` (see docs/python-api.md).

Both open the session's agent (the live one, a stored session resumed, or a new session), send
the prompt with `followup`, and follow that turn through the session's events until the agent is
idle again. The agent stays open (owned by the caller's plugin, like `agents.create`), so the
next call on the same session continues the conversation.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import anyio

from plugins.session.hooks import EVENT

from .errors import AgentError
from .hooks import PARENT, STATUS, CancelCause
from .results import RunResult, StreamItem, TurnEnd, TurnFold

if TYPE_CHECKING:
    from framework import AbortSignal

    from .agent import Agent
    from .options import AgentOptions
    from .service import AgentsService, Setup


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


def new_session_id() -> str:
    """A readable unique id: `s-<yyyymmdd>-<6 hex>`."""
    return f"s-{time.strftime('%Y%m%d')}-{secrets.token_hex(3)}"


async def run_turn_to_idle(
    service: AgentsService, prompt: str, **options: Unpack[RunOptions]
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
    prompt: str,
    *,
    session: str | None = None,
    agent_options: AgentOptions | None = None,
    setup: Setup | None = None,
    meta: Mapping[str, Any] | None = None,
    signal: AbortSignal | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """`agents.stream()`: the turn's items as they happen, `TurnEnd` last.

    Leaving the iteration early (break, an exception, cancellation) cancels the turn with
    `{"kind": "parent"}`.
    """
    if signal is not None:
        signal.throw_if_aborted()
    agent = await _open(service, session, agent_options, setup, meta)
    if agent.status != "idle" or agent.inbox.next_turn:
        state = agent.status if agent.status != "idle" else "holding queued prompts"
        raise AgentError(
            f'agent "{agent.id}" is {state}: run() and stream() start a turn on an idle agent '
            "with nothing queued (wait with agent.when_idle(), or queue with agent.followup())",
            "AGENT_BUSY",
        )
    send, receive = anyio.create_memory_object_stream[Mapping[str, Any] | None](math.inf)

    def on_event(live: Any, event: Mapping[str, Any]) -> None:
        if live.id == agent.id:
            send.send_nowait(event)

    def on_status(changed: Agent) -> None:
        if changed is agent and changed.status != "running":
            send.send_nowait(None)  # idle (or disposed): nothing more comes

    fold = TurnFold(agent.id)
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
                yield item
        if fold.result is None:
            raise AgentError(
                f'agent "{agent.id}" went idle without ending its turn (see agent/error)',
                "TURN_NOT_ENDED",
            )
        ended = True
        yield TurnEnd(fold.result)
    finally:
        off_event()
        off_status()
        if unlink is not None:
            unlink()
        send.close()
        receive.close()
        if not ended and _running(agent):
            agent.cancel(PARENT)


async def _open(
    service: AgentsService,
    session: str | None,
    agent_options: AgentOptions | None,
    setup: Setup | None,
    meta: Mapping[str, Any] | None,
) -> Agent:
    if session is not None:
        live = service.get(session)
        if live is not None:
            return live  # like dict.setdefault: the opening options are not applied again
        if await _stored(service, session):
            handle = await service.resume(session, agent_options=agent_options, setup=setup)
            return handle.agent
    handle = await service.create(
        session if session is not None else new_session_id(),
        meta=meta,
        agent_options=agent_options,
        setup=setup,
    )
    return handle.agent


async def _stored(service: AgentsService, session: str) -> bool:
    """Whether the persistence backend (if any) holds `session`."""
    persistence = service.ctx.get("sessionPersistence")
    if persistence is None:
        return False
    headers = await persistence.list()
    return any(header.get("id") == session for header in headers)


def _running(agent: Agent) -> bool:
    """Read `agent.status` afresh (it changes across awaits)."""
    return agent.status == "running"


def _cause(reason: object) -> CancelCause:
    if isinstance(reason, Mapping) and isinstance(reason.get("kind"), str):
        return dict(reason)
    return PARENT
