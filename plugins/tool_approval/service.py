"""The `approval` service: asks the answerers, records the audit pair, remembers "always".

Durability (docs/approval.md): `approval/asked` is flushed before any answerer is called, and an
allowing `approval/decided` is flushed before `decide` returns, so before the body may run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import uuid4

import anyio

from framework import AbortError, Service, abort_scope

from . import texts
from .answers import Answer, Answerer, ApprovalRequest
from .config import Config
from .log import ALWAYS, ASKED, DECIDED, POLICY, ApprovalLog, Outcome, Policy, Question

if TYPE_CHECKING:
    from framework import AbortSignal, Context
    from plugins.tools import ToolExecution

logger = logging.getLogger("dsh.tool_approval")


@dataclass(frozen=True)
class Decision:
    """The end of one approval: `outcome` (None when no question was needed or it stays open)
    and `denial`, the error text the model sees (None when the call may run)."""

    outcome: Outcome | None
    denial: str | None = None
    question_id: str | None = None

    @property
    def deferred(self) -> bool:
        """The question stays open: the turn ends blocked and a later process answers it."""
        return self.outcome is None and self.denial is not None


ALLOWED_BY_RULE = Decision(None)


class ApprovalService(Service):
    """`ctx.approval`: `decide(exec, reason)` for the tools pipeline, `answer_with(fn)` to
    register an answerer (owner-traced), `answer(session_id, call_id, answer)` to give the answer
    of an open question ahead of the continuation that consumes it, `pending(session)`,
    `policy_of(session)` and `set_policy(session, policy)`."""

    provide: ClassVar[str] = "approval"
    config: Config

    def __init__(self, ctx: Context, config: Config) -> None:
        super().__init__(ctx, config)
        self._answerers: list[Answerer] = []
        self._given: dict[tuple[str, str], Answer] = {}
        self._books: dict[str, tuple[Any, ApprovalLog]] = {}

    # -- reading the log -------------------------------------------------------------------

    def book(self, session: Any) -> ApprovalLog:
        """The approval state of a live session (folded incrementally as it grows)."""
        held = self._books.get(session.id)
        if held is None or held[0] is not session:
            held = (session, ApprovalLog())
            self._books[session.id] = held
        return held[1].update(session.events)

    def forget(self, session: Any) -> None:
        """Drop the state of a session that left the store (`session/disposed`)."""
        held = self._books.get(session.id)
        if held is not None and held[0] is session:
            del self._books[session.id]

    def pending(self, session: Any) -> list[Question]:
        """The session's questions still waiting for an answer."""
        return self.book(session).pending()

    def policy_of(self, session: Any) -> Policy:
        """The session's override (the last `approval/policy`), else the configured default."""
        policy = self.book(session).policy
        return "never" if (policy or self.config.policy) == "never" else "ask"

    def set_policy(self, session: Any, policy: Policy, source: str | None = None) -> None:
        """Record the session's policy override."""
        if policy not in ("ask", "never"):
            raise ValueError(f'an approval policy is "ask" or "never", got {policy!r}')
        data: dict[str, Any] = {"policy": policy}
        if source is not None:
            data["source"] = source
        session.append(POLICY, data)

    # -- answerers ---------------------------------------------------------------------------

    def answer_with(self, answerer: Answerer) -> Callable[[], Any]:
        """Register `answerer` (asked newest first; None passes on); undone with the caller."""
        if not callable(answerer):
            raise TypeError("answer_with() takes an async callable")

        def setup() -> Callable[[], None]:
            self._answerers.append(answerer)
            return lambda: self._answerers.remove(answerer)

        return self.caller.effect(setup)

    def answer(self, session_id: str, call_id: str, answer: Answer) -> None:
        """Give the answer to the open question of `call_id`; the session's next continuation
        records it (`dsh approve` / `dsh deny`)."""
        self._given[(session_id, call_id)] = answer

    # -- deciding ----------------------------------------------------------------------------

    async def decide(self, exec: ToolExecution, reason: str | None) -> Decision:
        """Settle a call that needs approval; called by the pipeline for `Ask`."""
        agent = exec.agent
        if agent is None:
            return Decision("unavailable", texts.unavailable(texts.NO_SESSION))
        session = agent.session
        book = self.book(session)
        question = book.open_question(exec.call_id)
        never = self.policy_of(session) == "never"
        if exec.name in book.always and not never:
            if question is None:
                return ALLOWED_BY_RULE
            # An open question of a tool the person since allowed always: that is its answer.
            return await self._allowed(session, question.id)
        if question is None:
            question_id = f"approval-{uuid4().hex[:12]}"
            data: dict[str, Any] = {
                "id": question_id,
                "toolName": exec.name,
                "callId": exec.call_id,
            }
            if reason is not None:
                data["reason"] = reason
            session.append(ASKED, data)
            if not never:
                try:
                    await self.ctx.sessions.flush(session)
                except BaseException:
                    session.append(DECIDED, {"id": question_id, "outcome": "unavailable"})
                    raise
        else:
            question_id, reason = question.id, question.reason
        if never:
            return self._decided(session, question_id, "rejected", texts.NEVER)
        request = ApprovalRequest(
            question_id, session.id, exec.call_id, exec.name, exec.arguments, reason
        )
        answer, why = await self._ask(request, exec.signal)
        if answer is None:
            if why == "cancelled":
                return self._decided(session, question_id, "cancelled", texts.CANCELLED)
            return self._decided(session, question_id, "unavailable", texts.unavailable(why))
        if answer.kind == "later":
            return Decision(None, texts.waiting(question_id), question_id)
        if answer.kind == "reject":
            return self._decided(session, question_id, "rejected", texts.rejected(answer.reason))
        if answer.kind == "always":
            session.append(ALWAYS, {"id": question_id, "toolName": exec.name}, ignorable=True)
        return await self._allowed(session, question_id)

    async def _allowed(self, session: Any, question_id: str) -> Decision:
        """Record the grant and make it durable before the body may run."""
        decision = self._decided(session, question_id, "allowed-once", None)
        await self.ctx.sessions.flush(session)
        return decision

    def _decided(
        self, session: Any, question_id: str, outcome: Outcome, denial: str | None
    ) -> Decision:
        session.append(DECIDED, {"id": question_id, "outcome": outcome})
        return Decision(outcome, denial, question_id)

    async def _ask(
        self, request: ApprovalRequest, signal: AbortSignal
    ) -> tuple[Answer | None, str]:
        """The first answer (a given one, else newest answerer first), or None and why not."""
        given = self._given.pop((request.session_id, request.call_id), None)
        if given is not None:
            return given, ""
        answerers = list(reversed(self._answerers))
        if not answerers:
            return None, "no approver is available"
        timeout = self.config.timeout_ms
        try:
            with (
                abort_scope(signal),
                anyio.move_on_after(math.inf if timeout is None else timeout / 1000) as scope,
            ):
                for answerer in answerers:
                    answer = await answerer(request)
                    if answer is not None:
                        if not isinstance(answer, Answer):
                            raise TypeError(
                                f"an answerer must return an Answer or None, got "
                                f"{type(answer).__name__}"
                            )
                        return answer, ""
            if scope.cancelled_caught:
                return None, f"no answer within {_ms(timeout)} ms"
        except AbortError:
            return None, "cancelled"
        except Exception as error:
            logger.warning("approval %s: the approver failed: %s", request.id, error)
            return None, f"the approver failed: {error or type(error).__name__}"
        return None, "no approver answered"


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return str(int(value)) if float(value).is_integer() else str(value)
