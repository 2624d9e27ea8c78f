"""The `agent/request-error` executor: retry a failed model request of the same step.

See docs/retries.md. A failure is retried when the route's `RetryPolicy` allows its code and
count, the request yielded no content, the turn is not aborted and the provider did not ask for a
longer wait than `max_wait_ms`. Each retry appends `llm/retry`, waits (abortable), appends
`llm/retry-started` and returns `Retry()`.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from plugins.agent import RequestFailed, Retry
from plugins.llm import RetryPolicy

if TYPE_CHECKING:
    from framework import AbortSignal

Sleep = Callable[[float, "AbortSignal"], Awaitable[None]]

#: Chunk types that carry no model output: a request that yielded only these may be sent again.
_NO_CONTENT = frozenset({"usage", "finish"})


async def abortable_sleep(seconds: float, signal: AbortSignal) -> None:
    """Wait `seconds`, or less if `signal` aborts first."""
    with anyio.move_on_after(seconds):
        await signal.wait()


class RetryExecutor:
    """An `agent/request-error` listener (`ctx.on(REQUEST_ERROR, executor)`)."""

    def __init__(
        self,
        *,
        max_wait_ms: int,
        rand: Callable[[], float] = random.random,
        sleep: Sleep = abortable_sleep,
    ) -> None:
        self._max_wait_ms = max_wait_ms
        self._rand = rand
        self._sleep = sleep

    async def __call__(self, payload: RequestFailed) -> Retry | None:
        """`Retry()` after the backoff, or None to let the failure end the turn."""
        failure = payload.failure
        signal = payload.signal
        if signal.aborted:
            return None
        policy = payload.retry_policy or RetryPolicy()
        session = payload.agent.session
        prior, content = _attempts(session.events, payload.turn, payload.step)
        if content:
            return None
        retry = 1 if prior is None else int(prior["retry"]) + 1
        if not policy.allows(str(failure.get("code")), retry):
            return None
        delay_ms = self._delay_ms(policy, retry, failure)
        if delay_ms is None:
            return None
        retry_id = str(uuid.uuid4()) if prior is None else str(prior["retryId"])
        data: dict[str, Any] = {
            "retryId": retry_id,
            "turn": payload.turn,
            "step": payload.step,
            "provider": payload.provider,
            "mode": policy.mode,
            "policyKey": payload.provider,
            "retry": retry,
        }
        if policy.mode == "normal":
            data["maxRetries"] = policy.max_retries
        data["delayMs"] = delay_ms
        data["failure"] = dict(failure)
        session.append("llm/retry", data)
        await self._sleep(delay_ms / 1000, signal)
        signal.throw_if_aborted()
        session.append(
            "llm/retry-started",
            {"retryId": retry_id, "turn": payload.turn, "step": payload.step, "retry": retry},
        )
        return Retry()

    def _delay_ms(self, policy: RetryPolicy, retry: int, failure: dict[str, Any]) -> int | None:
        """The provider's retry-after when it sent one (None if longer than `max_wait_ms`),
        else the policy's backoff."""
        after = failure.get("providerRetryAfterMs")
        if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
            return after if after <= self._max_wait_ms else None
        return policy.backoff_ms(retry, self._rand())


def _attempts(
    events: Sequence[dict[str, Any]], turn: int, step: int
) -> tuple[dict[str, Any] | None, bool]:
    """The step's last `llm/retry` data (None before the first retry) and whether the failed
    attempt (the chunks since the step's start or last `llm/retry-started`) yielded content."""
    content = False
    current = True
    for event in reversed(events):
        kind = event["type"]
        data = event["data"]
        if not isinstance(data, dict) or data.get("turn") != turn or data.get("step") != step:
            continue
        if kind == "step/start":
            break
        if kind == "llm/retry":
            return data, content
        if kind == "llm/retry-started":
            current = False
        elif kind == "assistant/chunk" and current:
            content = content or data["chunk"].get("type") not in _NO_CONTENT
    return None, content
