"""`Agent`: one session's inbox, driver and scoped context (docs/agent-loop.md)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from framework import AbortController, AbortSignal
from plugins.session.jsonutil import snapshot
from plugins.session.owned import append_owned

from .hooks import (
    DISPOSED,
    ERROR,
    INBOX_EVENTS,
    STATUS,
    USER,
    AgentErrorEvent,
    CancelCause,
    InboxChange,
)
from .inbox import Inbox, Message, Target, replay_start
from .request import RequestState
from .turn import run_turn

if TYPE_CHECKING:
    from framework import Context
    from plugins.session import Session

    from .options import AgentOptions
    from .service import AgentsService

logger = logging.getLogger("dsh.agent")

AgentStatus = Literal["idle", "running", "disposed"]


class Agent:
    """A conversation driven over one live session.

    `followup` queues a prompt for the next turn and wakes the driver; `steer` queues a message
    for the next step (and wakes); `inject` queues for the next step without waking. When the
    driver wakes from idle, the turn's synchronous prefix (`turn/start` and the claim splices)
    is in the log before the sending call returns. `agent.ctx` is the agent's scoped context:
    `agent/*` and `tools/*` listeners registered through it see only this agent. `stored`:
    the session was loaded from storage (its inbox is rebuilt from the whole log after the seed).
    """

    def __init__(
        self,
        service: AgentsService,
        session: Session,
        options: AgentOptions,
        ctx: Context,
        *,
        stored: bool = False,
    ) -> None:
        self.service = service
        self.session = session
        self.options = options
        self.ctx = ctx
        self.status: AgentStatus = "idle"
        self.inbox = Inbox(self._append, self._notify_inbox)
        # A stored session's queued prompts are pending again (docs/agent-loop.md).
        start = replay_start(session.header, session.first_live_seq, stored=stored)
        self.inbox.replay(session.events[start:])
        self.request_state = RequestState(session.events)
        self._last_turn = _last_turn(session.events)
        self._controller: AbortController | None = None
        self._wake_requested = False
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def id(self) -> str:
        """The agent's id: its session's id."""
        return self.session.id

    def __repr__(self) -> str:
        return f"<Agent {self.id!r} {self.status}>"

    # -- sending ---------------------------------------------------------------------------

    def followup(self, message: str | Mapping[str, Any]) -> Message:
        """Queue a prompt for the next turn and wake the driver."""
        return self._send("next-turn", message, wake=True)

    def steer(self, message: str | Mapping[str, Any]) -> Message:
        """Queue a message for the next step of the running turn (or a new one) and wake."""
        return self._send("next-step", message, wake=True)

    def inject(self, message: str | Mapping[str, Any]) -> Message:
        """Queue a message for the next step without waking the driver."""
        return self._send("next-step", message, wake=False)

    def cancel(self, cause: CancelCause = USER, *, keep_inbox: bool = False) -> None:
        """Abort the running turn with `cause` (persisted in its `turn/end`); unless
        `keep_inbox`, discard pending messages."""
        cause = snapshot(cause)
        if not isinstance(cause, dict) or not isinstance(cause.get("kind"), str):
            raise TypeError(f'a cancel cause must be {{"kind": <str>, ...}}, got {cause!r}')
        if not keep_inbox:
            self.inbox.clear()
            self._wake_requested = False
        if self._controller is not None:
            self._controller.abort(cause)

    async def stop(self) -> None:
        """Cancel for good (`disposed`, inbox cleared) and wait until the driver is idle."""
        self.cancel(DISPOSED)
        self.status = "disposed"
        await self._idle.wait()

    async def when_idle(self) -> None:
        """Wait until the driver is idle (its last `turn/end` durable when `flush_on_idle`)."""
        await self._idle.wait()

    def _send(self, target: Target, message: str | Mapping[str, Any], *, wake: bool) -> Message:
        if self.status == "disposed":
            raise RuntimeError(f'agent "{self.id}" is disposed')
        if wake and self.status == "running":
            controller = self._controller
            if controller is not None and controller.signal.aborted:
                # The running turn is unwinding: keep the message for a new turn (a latch).
                target = "next-turn"
                if controller.signal.reason != DISPOSED:
                    self._wake_requested = True
            else:
                self._wake_requested = True
        item = self.inbox.insert(target, message)
        if wake and self.status == "idle":
            self._start()
        return item

    # -- the driver ------------------------------------------------------------------------

    def _start(self) -> None:
        """Wake from idle: running, a new controller, the first turn's synchronous prefix."""
        self.status = "running"
        self._idle = anyio.Event()
        self.ctx.emit(STATUS, self)
        turn, messages, signal = self._begin_turn()
        self.service.spawn(self._drive, turn, messages, signal)

    def _begin_turn(self) -> tuple[int, list[Message], AbortSignal]:
        controller = self._controller = AbortController()
        self._wake_requested = False
        self._last_turn += 1
        turn = self._last_turn
        append_owned(self.session, "turn/start", {"turn": turn})
        return turn, self.inbox.claim("next-turn"), controller.signal

    async def _drive(self, turn: int, messages: list[Message], signal: AbortSignal) -> None:
        try:
            while True:
                reason = await run_turn(self, turn, messages, signal)
                if not self._continues(reason):
                    await self._checkpoint()
                    if not self._continues(reason):
                        break
                turn, messages, signal = self._begin_turn()
        except Exception as error:  # a broken session or listener: contain it, go idle
            logger.error('agent "%s": driver failed: %s', self.id, error, exc_info=error)
            self.ctx.emit(ERROR, AgentErrorEvent(self, error))
        finally:
            self._controller = None
            if self.status == "running":
                self.status = "idle"
            self.ctx.emit(STATUS, self)
            self._idle.set()

    def _continues(self, reason: Mapping[str, Any]) -> bool:
        """After a turn: go on while work is pending. After an error, pending items wait for a
        waking send; after a disposal, nothing runs unless a send came first (a latch)."""
        if not self.inbox.pending:
            return False
        if self._wake_requested:
            return True
        if reason["kind"] == "error":
            return False
        return bool(reason["kind"] != "aborted" or reason["reason"] != DISPOSED)

    async def _checkpoint(self) -> None:
        """The idle checkpoint: make the last `turn/end` durable before going idle."""
        if not self.service.config.flush_on_idle:
            return
        try:
            await self.service.sessions.flush(self.session)
        except Exception as error:
            logger.warning('agent "%s": idle checkpoint failed: %s', self.id, error)
            self.ctx.emit(ERROR, AgentErrorEvent(self, error))

    # -- plumbing --------------------------------------------------------------------------

    def _append(self, event_type: str, data: dict[str, Any]) -> object:
        return self.session.append(event_type, data)

    def _notify_inbox(self, name: str, target: Target, messages: list[Message]) -> None:
        self.ctx.emit(INBOX_EVENTS[name], InboxChange(self, target, messages))


def _last_turn(events: Sequence[dict[str, Any]]) -> int:
    for event in reversed(events):
        if event["type"] == "turn/start":
            turn: int = event["data"]["turn"]
            return turn
    return 0
