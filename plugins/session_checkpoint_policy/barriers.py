"""The three semantic durability barriers (spec 04 §2), shared by the base and strict policies."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any

from plugins.tools import ToolExecutionResult, aborted_before_dispatch_result

from .metrics import checkpoint

#: Monotonic clock (seconds) used by the strict variant's interval checkpoints; patchable in tests.
now: Callable[[], float] = time.monotonic


def install(ctx: Any, stream_checkpoint_ms: int | None = None) -> None:
    """Register the request, dispatch and step barriers on `ctx` (fiber effects, no prepend).

    With `stream_checkpoint_ms`, the request barrier also checkpoints while a response streams.
    """
    ctx.on("llm/stream", _request_barrier(ctx, stream_checkpoint_ms))
    ctx.on("tools/execute", _dispatch_barrier(ctx))
    ctx.on("agent/pre-step", _step_barrier(ctx))


def _request_barrier(
    ctx: Any, interval_ms: int | None
) -> Callable[[Any, Callable[[], AsyncIterable[Any]]], AsyncIterable[Any]]:
    def listener(options: Any, next: Callable[[], AsyncIterable[Any]]) -> AsyncIterable[Any]:
        session_id = getattr(options, "session_id", None)
        session = ctx.sessions.get(session_id) if session_id is not None else None
        if session is None:
            return next()
        return _checkpointed_stream(ctx, session, next, interval_ms)

    return listener


async def _checkpointed_stream(
    ctx: Any,
    session: Any,
    next: Callable[[], AsyncIterable[Any]],
    interval_ms: int | None,
) -> AsyncIterator[Any]:
    # Nothing downstream (middleware, adapter, network) exists until this flush resolves.
    await checkpoint(ctx, session, "llm/stream")
    downstream = aiter(next())
    try:
        if interval_ms is None:
            async for chunk in downstream:
                yield chunk
            return
        interval = interval_ms / 1000.0
        last = now()
        while True:
            if now() - last >= interval:
                await checkpoint(ctx, session, "llm/stream:interval")
                last = now()
            try:
                chunk = await anext(downstream)
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        aclose = getattr(downstream, "aclose", None)
        if aclose is not None:
            await aclose()


def _dispatch_barrier(
    ctx: Any,
) -> Callable[[Any, Callable[[], Awaitable[ToolExecutionResult]]], Awaitable[ToolExecutionResult]]:
    async def listener(
        exec: Any, next: Callable[[], Awaitable[ToolExecutionResult]]
    ) -> ToolExecutionResult:
        if exec.agent is None or exec.parent is not None:
            # Nested dispatches reuse the outer model-visible call's checkpoint.
            return await next()
        await checkpoint(ctx, exec.agent.session, "tools/execute", exec.call_id)
        if exec.signal.aborted:
            return aborted_before_dispatch_result()
        return await next()

    return listener


def _step_barrier(ctx: Any) -> Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]:
    async def listener(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        await checkpoint(ctx, payload.agent.session, "agent/pre-step")
        return await next()

    return listener
