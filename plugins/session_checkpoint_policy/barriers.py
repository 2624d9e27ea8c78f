"""The three semantic durability barriers, shared by the base and strict policies."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

from framework import Context
from plugins.agent.hooks import PRE_STEP, Enter, PreStep, Reject
from plugins.llm import GenerateOptions, StreamChunk
from plugins.llm.hooks import STREAM
from plugins.session import Session, SessionStore
from plugins.tools import ToolExecution, ToolExecutionResult, aborted_before_dispatch_result
from plugins.tools.hooks import EXECUTE

from .metrics import checkpoint

#: Monotonic clock (seconds) used by the strict variant's interval checkpoints; patchable in tests.
now: Callable[[], float] = time.monotonic

StreamNext = Callable[[], AsyncIterable[StreamChunk]]
ExecuteNext = Callable[[], Awaitable[ToolExecutionResult]]
StepNext = Callable[[], Awaitable[Enter | Reject]]


def install(ctx: Context, stream_checkpoint_ms: int | None = None) -> None:
    """Register the request, dispatch and step barriers on `ctx` (fiber effects, no prepend).

    With `stream_checkpoint_ms`, the request barrier also checkpoints while a response streams.
    """
    ctx.on(STREAM, _request_barrier(ctx, stream_checkpoint_ms))
    ctx.on(EXECUTE, _dispatch_barrier(ctx))
    ctx.on(PRE_STEP, _step_barrier(ctx))


def _request_barrier(
    ctx: Context, interval_ms: int | None
) -> Callable[[GenerateOptions, StreamNext], AsyncIterable[StreamChunk]]:
    def listener(options: GenerateOptions, next: StreamNext) -> AsyncIterable[StreamChunk]:
        session_id = options.session_id
        session = ctx.service(SessionStore).get(session_id) if session_id is not None else None
        if session is None:
            return next()
        return _checkpointed_stream(ctx, session, next, interval_ms)

    return listener


async def _checkpointed_stream(
    ctx: Context,
    session: Session,
    next: StreamNext,
    interval_ms: int | None,
) -> AsyncIterator[StreamChunk]:
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
    ctx: Context,
) -> Callable[[ToolExecution, ExecuteNext], Awaitable[ToolExecutionResult]]:
    async def listener(exec: ToolExecution, next: ExecuteNext) -> ToolExecutionResult:
        if exec.agent is None or exec.parent is not None:
            # Nested dispatches reuse the outer model-visible call's checkpoint.
            return await next()
        await checkpoint(ctx, exec.agent.session, "tools/execute", exec.call_id)
        if exec.signal.aborted:
            return aborted_before_dispatch_result()
        return await next()

    return listener


def _step_barrier(ctx: Context) -> Callable[[PreStep, StepNext], Awaitable[Enter | Reject]]:
    async def listener(payload: PreStep, next: StepNext) -> Enter | Reject:
        await checkpoint(ctx, payload.agent.session, "agent/pre-step")
        return await next()

    return listener
