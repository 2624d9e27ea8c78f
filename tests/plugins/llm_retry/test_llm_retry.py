"""The retry executor (`dsh-llm-retry`): policy arithmetic and retries inside a real agent loop.

A scripted in-process adapter fails or answers each request; the executor's sleep is recorded
(no real waiting) except in the abort test, which waits for real and aborts the backoff.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

import plugins.agent
import plugins.llm
import plugins.llm_retry
import plugins.session
import plugins.tools
from framework import AbortSignal, Context
from plugins.agent import USER
from plugins.llm import GenerateOptions, LlmError, RetryPolicy, StreamChunk, chunks
from plugins.llm_retry import RetryExecutor

pytestmark = pytest.mark.anyio

TEXT: list[StreamChunk] = [
    chunks.block_start(0, "text"),
    chunks.text_delta(0, "recovered"),
    chunks.block_end(0, chunks.text_block("recovered")),
    chunks.finish(chunks.stop_reason("stop")),
]


class Scripted:
    """An adapter that plays one item per request: chunks to yield, then an error to raise."""

    def __init__(self, policy: RetryPolicy, *items: tuple[list[StreamChunk], LlmError | None]):
        self.policy = policy
        self.items = deque(items)
        self.calls = 0

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        return self.policy

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        self.calls += 1
        out, error = self.items.popleft()
        for chunk in out:
            yield chunk
        if error is not None:
            raise error


def fail(code: str, **fields: Any) -> tuple[list[StreamChunk], LlmError]:
    return [], LlmError(f"{code.lower()} failure", code, **fields)


OK: tuple[list[StreamChunk], None] = (TEXT, None)


class Sleeps:
    """A fake clock: records each requested wait and returns at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float, signal: AbortSignal) -> None:
        self.seconds.append(seconds)


@asynccontextmanager
async def stack(adapter: Scripted, executor: Any = None) -> AsyncIterator[Context]:
    """sessions + llm (the scripted route `p`) + tools + agents + the executor (or the plugin)."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        ctx.llm.register_adapter("p", adapter)
        if executor is None:
            await ctx.plugin(plugins.llm_retry)
        else:
            await ctx.plugin(lambda c, _config: c.on("agent/request-error", executor))
        await ctx.plugin(plugins.agent, {"provider": "p", "model": "m"})
        yield ctx


async def run(ctx: Context) -> Any:
    handle = await ctx.agents.create("s")
    handle.agent.followup("go")
    await handle.agent.when_idle()
    return handle.agent.session


def of(session: Any, kind: str) -> list[dict[str, Any]]:
    return [event["data"] for event in session.events if event["type"] == kind]


def end(session: Any) -> dict[str, Any]:
    reason: dict[str, Any] = of(session, "turn/end")[-1]["reason"]
    return reason


FAST = RetryPolicy(initial_delay_ms=100, max_delay_ms=1000, jitter_ratio=0.2, max_retries=3)


# -- the policy's arithmetic --------------------------------------------------------------------


def test_backoff_doubles_up_to_the_cap_and_jitter_stays_in_its_band() -> None:
    policy = RetryPolicy(initial_delay_ms=500, max_delay_ms=10000, jitter_ratio=0.1)
    assert [policy.backoff_ms(n, 0.5) for n in range(1, 7)] == [500, 1000, 2000, 4000, 8000, 10000]
    assert policy.backoff_ms(1, 0.0) == 450
    assert policy.backoff_ms(1, 0.999999) == 550
    assert policy.backoff_ms(6, 0.999999) == 10000  # the cap bounds the jittered value too
    assert policy.backoff_ms(10_000, 0.5) == 10000  # no overflow in "always" mode
    assert RetryPolicy(jitter_ratio=0).backoff_ms(2, 0.123) == 1000


def test_allows_follows_codes_count_and_mode() -> None:
    normal = RetryPolicy(max_retries=2)
    assert [normal.allows("SERVER", n) for n in (1, 2, 3)] == [True, True, False]
    assert not normal.allows("AUTH", 1)
    assert not normal.allows("ABORTED", 1)
    assert RetryPolicy(mode="always", max_retries=0).allows("RATE_LIMIT", 1000)


# -- inside the agent loop ----------------------------------------------------------------------


async def test_retryable_failures_are_retried_then_the_turn_completes() -> None:
    adapter = Scripted(FAST, fail("SERVER", status=500), fail("RATE_LIMIT", status=429), OK)
    sleeps = Sleeps()
    async with stack(
        adapter, RetryExecutor(max_wait_ms=60000, rand=lambda: 0.5, sleep=sleeps)
    ) as ctx:
        session = await run(ctx)
    assert end(session) == {"kind": "completed"}
    assert adapter.calls == 3
    assert sleeps.seconds == [0.1, 0.2]
    retries = of(session, "llm/retry")
    assert [list(data) for data in retries] == [
        [
            "retryId",
            "turn",
            "step",
            "provider",
            "mode",
            "policyKey",
            "retry",
            "maxRetries",
            "delayMs",
            "failure",
        ]
    ] * 2
    first, second = retries
    assert first["retryId"] == second["retryId"]
    assert {k: v for k, v in first.items() if k != "retryId"} == {
        "turn": 1,
        "step": 1,
        "provider": "p",
        "mode": "normal",
        "policyKey": "p",
        "retry": 1,
        "maxRetries": 3,
        "delayMs": 100,
        "failure": {"message": "server failure", "code": "SERVER", "status": 500},
    }
    assert (second["retry"], second["delayMs"], second["failure"]["code"]) == (2, 200, "RATE_LIMIT")
    assert of(session, "llm/retry-started") == [
        {"retryId": first["retryId"], "turn": 1, "step": 1, "retry": 1},
        {"retryId": first["retryId"], "turn": 1, "step": 1, "retry": 2},
    ]
    kinds = [e["type"] for e in session.events]
    assert kinds.count("step/start") == 1
    assert kinds.index("llm/retry") < kinds.index("llm/retry-started")
    (message,) = of(session, "assistant/message")
    assert message["message"]["content"] == [{"type": "text", "text": "recovered"}]


def executor(sleeps: Sleeps, max_wait_ms: int = 60000) -> RetryExecutor:
    return RetryExecutor(max_wait_ms=max_wait_ms, rand=lambda: 0.5, sleep=sleeps)


async def test_the_provider_retry_after_replaces_the_backoff() -> None:
    adapter = Scripted(FAST, fail("RATE_LIMIT", provider_retry_after_ms=2500), OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session) == {"kind": "completed"}
    assert sleeps.seconds == [2.5]
    assert [data["delayMs"] for data in of(session, "llm/retry")] == [2500]


async def test_a_retry_after_beyond_max_wait_ends_the_turn_at_once() -> None:
    adapter = Scripted(FAST, fail("RATE_LIMIT", provider_retry_after_ms=3_600_000), OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps, max_wait_ms=60000)) as ctx:
        session = await run(ctx)
    assert end(session)["error"]["code"] == "RATE_LIMIT"
    assert (adapter.calls, sleeps.seconds, of(session, "llm/retry")) == (1, [], [])


@pytest.mark.parametrize("code", ["AUTH", "QUOTA", "INVALID_REQUEST", "ABORTED", "STREAM_CLOSED"])
async def test_other_codes_are_not_retried(code: str) -> None:
    adapter = Scripted(FAST, fail(code), OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session) == {
        "kind": "error",
        "error": {"message": f"{code.lower()} failure", "code": code},
    }
    assert (adapter.calls, sleeps.seconds, of(session, "llm/retry")) == (1, [], [])


async def test_no_retry_after_the_request_yielded_content() -> None:
    partial = [chunks.block_start(0, "text"), chunks.text_delta(0, "half an ans")]
    adapter = Scripted(FAST, (partial, LlmError("connection dropped", "TRANSPORT")), OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session) == {
        "kind": "error",
        "error": {"message": "connection dropped", "code": "TRANSPORT"},
    }
    assert (adapter.calls, sleeps.seconds, of(session, "llm/retry")) == (1, [], [])


async def test_content_in_a_later_attempt_stops_the_chain() -> None:
    """The first attempt yields only usage (no content): retried; the second streams text and
    drops: not retried, although retries remain."""
    usage_only = [chunks.usage({"inputTokens": 3, "outputTokens": 0})]
    partial = [chunks.block_start(0, "reasoning"), chunks.reasoning_delta(0, "hmm")]
    adapter = Scripted(
        FAST,
        (usage_only, LlmError("overloaded", "SERVER")),
        (partial, LlmError("cut", "TIMEOUT")),
        OK,
    )
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session)["error"]["code"] == "TIMEOUT"
    assert adapter.calls == 2
    assert [data["retry"] for data in of(session, "llm/retry")] == [1]


async def test_retries_stop_at_max_retries_in_normal_mode() -> None:
    policy = RetryPolicy(max_retries=2, initial_delay_ms=10, max_delay_ms=10, jitter_ratio=0)
    adapter = Scripted(policy, *[fail("SERVER")] * 3, OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session)["error"]["code"] == "SERVER"
    assert adapter.calls == 3
    assert sleeps.seconds == [0.01, 0.01]
    assert [(d["retry"], d["maxRetries"]) for d in of(session, "llm/retry")] == [(1, 2), (2, 2)]


async def test_always_mode_has_no_limit_and_no_max_retries_field() -> None:
    policy = RetryPolicy(mode="always", max_retries=0, initial_delay_ms=1, max_delay_ms=1)
    adapter = Scripted(policy, *[fail("TRANSPORT")] * 4, OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
    assert end(session) == {"kind": "completed"}
    retries = of(session, "llm/retry")
    assert [d["retry"] for d in retries] == [1, 2, 3, 4]
    assert all(d["mode"] == "always" and "maxRetries" not in d for d in retries)


async def test_each_step_counts_its_own_retries() -> None:
    """A second turn starts a new chain (new retryId, retry 1) although the first used two."""
    policy = RetryPolicy(max_retries=2, initial_delay_ms=1, max_delay_ms=1)
    adapter = Scripted(policy, fail("SERVER"), fail("SERVER"), OK, fail("SERVER"), OK)
    sleeps = Sleeps()
    async with stack(adapter, executor(sleeps)) as ctx:
        session = await run(ctx)
        agent = ctx.agents.get("s")
        agent.followup("again")
        await agent.when_idle()
    assert [r["reason"] for r in of(session, "turn/end")] == [{"kind": "completed"}] * 2
    retries = of(session, "llm/retry")
    assert [(d["turn"], d["retry"]) for d in retries] == [(1, 1), (1, 2), (2, 1)]
    assert retries[0]["retryId"] == retries[1]["retryId"] != retries[2]["retryId"]


async def test_the_mounted_plugin_retries_with_the_route_policy() -> None:
    policy = RetryPolicy(initial_delay_ms=20, max_delay_ms=20, jitter_ratio=0)
    adapter = Scripted(policy, fail("SERVER"), OK)
    async with stack(adapter) as ctx:
        started = time.monotonic()
        session = await run(ctx)
        elapsed = time.monotonic() - started
    assert end(session) == {"kind": "completed"}
    assert [d["delayMs"] for d in of(session, "llm/retry")] == [20]
    assert elapsed >= 0.02


async def test_an_abort_during_the_backoff_ends_the_turn_promptly() -> None:
    policy = RetryPolicy(initial_delay_ms=30000, max_delay_ms=30000, jitter_ratio=0)
    adapter = Scripted(policy, fail("SERVER"), OK)
    async with stack(adapter) as ctx:
        waiting = anyio.Event()
        ctx.on("session/event", lambda _s, e: e["type"] == "llm/retry" and waiting.set())
        handle = await ctx.agents.create("s")
        agent = handle.agent
        agent.followup("go")
        with anyio.fail_after(5):
            await waiting.wait()
        started = time.monotonic()
        agent.cancel(USER)
        with anyio.fail_after(5):
            await agent.when_idle()
        elapsed = time.monotonic() - started
        session = agent.session
    assert elapsed < 1.0
    assert end(session) == {"kind": "aborted", "reason": {"kind": "user"}}
    assert adapter.calls == 1
    assert of(session, "llm/retry-started") == []


async def test_the_plugin_config_refuses_a_negative_wait() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        plugins.llm_retry.Config(max_wait_ms=-1)
