"""The strict variant's interval checkpoints (docs/checkpoint-policy.md; §6.3 N2, N3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy.barriers as barriers
import plugins.session_checkpoint_policy.strict as strict
import plugins.tools
from framework import Context
from plugins.llm import GenerateOptions, chunks

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class SlowAdapter:
    """Five text chunks; the clock advances 400 ms while each one is produced."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.closed = False
        self.pulled = 0

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            for i in range(5):
                self.clock.t += 0.4
                self.pulled += 1
                yield chunks.text_delta(0, f"c{i}")
        finally:
            self.closed = True


async def run(
    interval_ms: int, *, fail_after: int | None = None
) -> tuple[list[int], SlowAdapter, Exception | None]:
    clock = Clock()
    flushes_at: list[int] = []
    adapter = SlowAdapter(clock)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(barriers, "now", clock)
        async with Context() as ctx:
            await ctx.plugin(plugins.session)
            await ctx.plugin(plugins.llm)
            await ctx.plugin(plugins.tools)
            await ctx.plugin(lambda c, _: c.provide("sessionPersistence", SimpleNamespace()))
            await ctx.plugin(strict, {"stream_checkpoint_ms": interval_ms})
            session = ctx.sessions.create("s")

            def spy(s: Any) -> None:
                flushes_at.append(adapter.pulled)
                if fail_after is not None and len(flushes_at) > fail_after:
                    raise RuntimeError("disk unavailable")

            ctx.on("session/flush", spy)
            ctx.llm.register_adapter("slow", adapter)
            options = GenerateOptions(provider="slow", model="m", messages=[], session_id="s")
            try:
                async for chunk in ctx.llm.stream(options):
                    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
            except RuntimeError as exc:
                return flushes_at, adapter, exc
    return flushes_at, adapter, None


async def test_n2_interval_checkpoint_before_the_fourth_chunk_is_pulled() -> None:
    flushes_at, adapter, error = await run(1000)
    assert error is None
    # Pre-dispatch (nothing pulled yet), then once chunk 3 was delivered and 1.2 s had passed.
    assert flushes_at == [0, 3]
    assert adapter.pulled == 5


async def test_n2_long_interval_only_checkpoints_before_dispatch() -> None:
    flushes_at, _, error = await run(10_000)
    assert error is None
    assert flushes_at == [0]


async def test_n3_mid_stream_checkpoint_failure_closes_downstream_and_raises() -> None:
    flushes_at, adapter, error = await run(1000, fail_after=1)
    assert str(error) == "disk unavailable"
    assert flushes_at == [0, 3]
    # Downstream was closed at the failed checkpoint: no chunk after the third was pulled.
    assert adapter.closed is True
    assert adapter.pulled == 3


def test_config_bounds_and_default() -> None:
    assert strict.Config().stream_checkpoint_ms == 1000
    for bad in (0, 2**31):
        with pytest.raises(ValidationError):
            strict.Config(stream_checkpoint_ms=bad)
    with pytest.raises(ValidationError):
        strict.Config.model_validate({"unknown": 1})
    assert strict.name == "session-checkpoint-policy-strict"
    assert strict.inject == ["llm", "sessionPersistence", "sessions", "tools"]
