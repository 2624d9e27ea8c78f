"""The policy's unit acceptance cases (1-11) and its metrics event (N1)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy as policy
import plugins.tools
from framework import AbortController, Context, FiberState
from framework.loader import resolve_plugin
from plugins.llm import GenerateOptions, chunks
from plugins.session_checkpoint_policy import CheckpointFlushed
from plugins.tools import Tool, ToolExecutionInput

pytestmark = pytest.mark.anyio

ABORTED_BEFORE_DISPATCH = {
    "isError": True,
    "content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
    "error": {
        "message": "tool call aborted before dispatch",
        "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
    },
}


@dataclass
class Harness:
    """sessions, llm, tools, a stub backend, the policy, a live session and its agent."""

    ctx: Context
    fiber: Any
    session: Any
    agent: Any
    order: list[str] = field(default_factory=list)
    flushed_ids: list[str] = field(default_factory=list)
    metrics: list[CheckpointFlushed] = field(default_factory=list)
    started: anyio.Event = field(default_factory=anyio.Event)
    gate: anyio.Event | None = None
    fail: bool = False

    @property
    def flushes(self) -> int:
        return len(self.flushed_ids)

    def options(self, session_id: str | None = None) -> GenerateOptions:
        return GenerateOptions(provider="probe", model="m", messages=[], session_id=session_id)

    def call(self, *, agent: Any = "default", parent: Any = None, signal: Any = None) -> Any:
        return ToolExecutionInput(
            call_id="call-1",
            name="probe",
            arguments={},
            signal=signal if signal is not None else AbortController().signal,
            agent=self.agent if agent == "default" else agent,
            parent=parent,
        )


class ProbeAdapter:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.order.append("adapter")
        yield chunks.block_start(0, "text")
        yield chunks.text_delta(0, "hi")
        yield chunks.finish(chunks.stop_reason("stop"))


def stub_persistence(ctx: Any, config: Any) -> None:
    """Presence gate only: the policy never calls the backend itself."""
    ctx.provide("sessionPersistence", SimpleNamespace(name="stub"))


@asynccontextmanager
async def harness(*, gated: bool = False, fail: bool = False) -> AsyncIterator[Harness]:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(stub_persistence)
        fiber = ctx.plugin(policy)
        await fiber
        session = ctx.sessions.create("live")
        h = Harness(ctx, fiber, session, SimpleNamespace(ctx=ctx, session=session))
        h.gate = anyio.Event() if gated else None
        h.fail = fail

        async def spy(s: Any) -> None:
            h.flushed_ids.append(s.id)
            if h.gate is not None:
                h.order.append("flush:start")
                h.started.set()
                await h.gate.wait()
                h.order.append("flush:end")
            if h.fail:
                raise RuntimeError("disk unavailable")

        ctx.on("session/flush", spy)
        ctx.on("checkpoint/flushed", h.metrics.append)
        ctx.llm.register_adapter("probe", ProbeAdapter(h.order))

        async def body(args: Any, exec: Any) -> Any:
            h.order.append("tool")
            return None

        ctx.tools.register(
            Tool(name="probe", description="probe", parameters={"type": "object"}, execute=body)
        )
        yield h


async def consume(stream: Any) -> list[dict[str, Any]]:
    return [chunk async for chunk in stream]


async def test_1_request_flush_gates_the_adapter() -> None:
    async with harness(gated=True) as h:
        stream = h.ctx.llm.stream(h.options(h.session.id))
        assert h.order == []
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume, stream)
            await h.started.wait()
            await anyio.sleep(0.01)
            assert h.order == ["flush:start"]
            assert h.gate is not None
            h.gate.set()
        assert h.order == ["flush:start", "flush:end", "adapter"]
        assert h.flushed_ids == ["live"]


async def test_2_request_without_session_id_is_not_checkpointed() -> None:
    async with harness() as h:
        await consume(h.ctx.llm.stream(h.options(None)))
        assert h.order == ["adapter"]
        assert h.flushes == 0
        assert h.metrics == []


@pytest.mark.parametrize("session_id", ["never-created", "detached"])
async def test_3_request_for_a_session_that_is_not_live(session_id: str) -> None:
    async with harness() as h:
        if session_id == "detached":
            other = h.ctx.sessions.create("detached")
            h.ctx.sessions.dispose(other)
            assert h.ctx.sessions.get("detached") is None
        await consume(h.ctx.llm.stream(h.options(session_id)))
        assert h.order == ["adapter"]
        assert h.flushes == 0
        assert h.metrics == []


async def test_3b_session_detached_before_first_iteration_fails_closed() -> None:
    async with harness() as h:
        other = h.ctx.sessions.create("late")
        stream = h.ctx.llm.stream(h.options("late"))
        h.ctx.sessions.dispose(other)
        with pytest.raises(Exception, match='session "late" is not live in this store'):
            await consume(stream)
        assert "adapter" not in h.order


async def test_4_rejected_request_flush_never_dispatches() -> None:
    async with harness(fail=True) as h:
        received: list[Any] = []

        async def collect() -> None:
            async for chunk in h.ctx.llm.stream(h.options(h.session.id)):
                received.append(chunk)

        with pytest.raises(RuntimeError, match=r"^disk unavailable$"):
            await collect()
        assert received == []
        assert "adapter" not in h.order


async def test_5_tool_body_waits_for_its_checkpoint() -> None:
    async with harness(gated=True) as h:
        results: list[Any] = []

        async def run() -> None:
            results.append(await h.ctx.tools.execute(h.call()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await h.started.wait()
            await anyio.sleep(0.01)
            assert h.order == ["flush:start"]
            assert h.gate is not None
            h.gate.set()
        assert h.order == ["flush:start", "flush:end", "tool"]
        assert results[0].is_error is False


async def test_5b_call_without_agent_is_not_checkpointed() -> None:
    async with harness() as h:
        result = await h.ctx.tools.execute(h.call(agent=None))
        assert result.is_error is False
        assert h.order == ["tool"]
        assert h.flushes == 0


async def test_6_cancellation_during_checkpoint_returns_aborted_before_dispatch() -> None:
    async with harness(gated=True) as h:
        entered: list[str] = []

        async def inner(exec: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            entered.append("inner")
            return await next()

        h.ctx.on("tools/execute", inner)
        controller = AbortController()
        results: list[Any] = []

        async def run() -> None:
            results.append(await h.ctx.tools.execute(h.call(signal=controller.signal)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await h.started.wait()
            controller.abort()
            assert h.gate is not None
            h.gate.set()
        assert results[0].to_json() == ABORTED_BEFORE_DISPATCH
        assert h.order == ["flush:start", "flush:end"]
        assert entered == []


async def test_7_rejected_tool_checkpoint_never_enters_the_body() -> None:
    async with harness(fail=True) as h:
        result = await h.ctx.tools.execute(h.call())
        assert result.is_error is True
        assert result.content == [{"type": "text", "text": "Error: disk unavailable"}]
        assert result.error is not None
        assert result.error.message == "disk unavailable"
        assert "tool" not in h.order


async def test_8_nested_dispatch_reuses_the_outer_checkpoint() -> None:
    async with harness() as h:
        result = await h.ctx.tools.execute(h.call(parent=object()))
        assert result.is_error is False
        assert h.order == ["tool"]
        assert h.flushes == 0
        assert h.metrics == []


async def test_9_pre_step_flushes_once_and_returns_the_decision() -> None:
    async with harness() as h:
        decision = object()
        payload = SimpleNamespace(
            agent=h.agent, messages=[], turn=1, step=1, signal=AbortController().signal
        )
        result = await h.ctx.waterfall("agent/pre-step", payload, inner=_returning(decision))
        assert result is decision
        assert h.flushed_ids == [h.session.id]


async def test_10_disposal_removes_all_three_barriers() -> None:
    async with harness() as h:
        await consume(h.ctx.llm.stream(h.options(h.session.id)))
        assert h.flushes == 1
        await h.fiber.dispose()
        assert h.fiber.state is FiberState.DISPOSED
        await consume(h.ctx.llm.stream(h.options(h.session.id)))
        result = await h.ctx.tools.execute(h.call())
        payload = SimpleNamespace(
            agent=h.agent, messages=[], turn=1, step=2, signal=AbortController().signal
        )
        await h.ctx.waterfall("agent/pre-step", payload, inner=_returning(None))
        assert h.flushes == 1
        assert h.order == ["adapter", "adapter", "tool"]
        assert result.is_error is False


async def test_11_loader_safe_shape() -> None:
    assert policy.name == "session-checkpoint-policy"
    assert policy.inject == ["llm", "sessionPersistence", "sessions", "tools"]
    assert callable(policy.apply)
    for absent in ("Config", "default", "Plugin"):
        assert not hasattr(policy, absent)
    here = Path(__file__).parent
    assert resolve_plugin("dsh-session-checkpoint-policy", here) is policy
    assert resolve_plugin("@deepseek-ai/dsh-session-checkpoint-policy", here) is policy

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        fiber = ctx.plugin(policy)
        await anyio.sleep(0.01)
        assert fiber.state is FiberState.PENDING
        backend = ctx.plugin(stub_persistence)
        await backend
        await fiber
        assert fiber.state is FiberState.ACTIVE
        await backend.dispose()
        await anyio.sleep(0.01)
        assert fiber.state is FiberState.PENDING


async def test_n1_one_metrics_event_per_barrier() -> None:
    async with harness() as h:
        await consume(h.ctx.llm.stream(h.options(h.session.id)))
        await h.ctx.tools.execute(h.call())
        payload = SimpleNamespace(
            agent=h.agent, messages=[], turn=1, step=1, signal=AbortController().signal
        )
        await h.ctx.waterfall("agent/pre-step", payload, inner=_returning(None))
        assert [(m.barrier, m.call_id, m.ok, m.error) for m in h.metrics] == [
            ("llm/stream", None, True, None),
            ("tools/execute", "call-1", True, None),
            ("agent/pre-step", None, True, None),
        ]
        assert all(m.session_id == "live" and m.duration_ms >= 0 for m in h.metrics)


async def test_n1_failed_checkpoint_reports_its_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="dsh.session_checkpoint_policy")
    async with harness(fail=True) as h:
        await h.ctx.tools.execute(h.call())
        assert [(m.barrier, m.ok, m.error) for m in h.metrics] == [
            ("tools/execute", False, "disk unavailable")
        ]
    assert any(
        r.getMessage().startswith(
            "checkpoint barrier=tools/execute session=live call=call-1 ok=False ms="
        )
        for r in caplog.records
    )


def _returning(value: object) -> Callable[[], Awaitable[object]]:
    async def inner() -> object:
        return value

    return inner
