"""The event bus: registration order, dispatch modes and the waterfall contract."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import Context, FiberState, FrameworkError

pytestmark = pytest.mark.anyio


def tracer(log: list[str], label: str) -> Callable[..., Any]:
    def listener(*args: Any) -> Any:
        *_, nxt = args
        log.append(f"{label}-in")
        result = nxt()
        log.append(f"{label}-out")
        return result

    return listener


async def test_waterfall_order_with_prepend() -> None:
    log: list[str] = []
    async with Context() as ctx:
        ctx.on("w", tracer(log, "A"))
        ctx.on("w", tracer(log, "B"))
        ctx.on("w", tracer(log, "P"), prepend=True)

        def inner() -> str:
            log.append("inner")
            return "result"

        assert ctx.waterfall("w", inner=inner) == "result"
    assert " ".join(log) == "P-in A-in B-in inner B-out A-out P-out"


async def test_waterfall_passes_args_and_returns_the_outermost_result() -> None:
    async with Context() as ctx:
        ctx.on("w", lambda payload, nxt: ("outer", payload, nxt()))
        ctx.on("w", lambda payload, nxt: ("inner", payload, nxt()))
        assert ctx.waterfall("w", 1, inner=lambda: "core") == (
            "outer",
            1,
            ("inner", 1, "core"),
        )
        assert ctx.waterfall("none", 1, inner=lambda: "core") == ("outer" if False else "core")


async def test_waterfall_veto_skips_inner_layers_and_default() -> None:
    called: list[str] = []
    async with Context() as ctx:
        ctx.on("w", lambda nxt: "vetoed")
        ctx.on("w", lambda nxt: called.append("second"))
        assert ctx.waterfall("w", inner=lambda: called.append("inner")) == "vetoed"
    assert called == []


async def test_waterfall_next_is_one_shot() -> None:
    async with Context() as ctx:

        def twice(nxt: Callable[[], Any]) -> Any:
            nxt()
            return nxt()

        ctx.on("w", twice)
        with pytest.raises(FrameworkError, match='next\\(\\) of waterfall "w" called more'):
            ctx.waterfall("w", inner=lambda: None)


async def test_waterfall_next_is_one_shot_even_after_an_inner_veto() -> None:
    async with Context() as ctx:

        def outer(nxt: Callable[[], Any]) -> Any:
            nxt()
            return nxt()

        ctx.on("w", outer)
        ctx.on("w", lambda nxt: "veto")
        with pytest.raises(FrameworkError):
            ctx.waterfall("w", inner=lambda: None)


async def test_waterfall_async_middleware_result_is_awaited_by_caller() -> None:
    async with Context() as ctx:

        async def wrap(payload: int, nxt: Callable[[], Any]) -> int:
            value: int = await nxt()
            return value + 1

        ctx.on("w", wrap)
        ctx.on("w", wrap)

        async def inner() -> int:
            return 40

        assert await ctx.waterfall("w", 0, inner=inner) == 42


async def test_lazy_async_generator_waterfall_builds_nothing_downstream_early() -> None:
    log: list[str] = []
    gate = anyio.Event()
    async with Context() as ctx:

        def checkpoint(options: object, nxt: Callable[[], AsyncIterator[str]]) -> Any:
            async def wrapper() -> AsyncIterator[str]:
                log.append("X start")
                await gate.wait()
                log.append("X done")
                async for chunk in nxt():
                    yield chunk

            return wrapper()

        def inner_layer(options: object, nxt: Callable[[], AsyncIterator[str]]) -> Any:
            log.append("inner layer")
            return nxt()

        async def adapter() -> AsyncIterator[str]:
            log.append("adapter")
            yield "chunk"

        ctx.on("llm/stream", checkpoint)
        ctx.on("llm/stream", inner_layer)
        stream = ctx.waterfall("llm/stream", None, inner=adapter)
        assert log == []
        chunks: list[str] = []

        async def consume() -> None:
            chunks.extend([chunk async for chunk in stream])

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.wait_all_tasks_blocked()
            assert log == ["X start"]
            gate.set()
        assert log == ["X start", "X done", "inner layer", "adapter"]
        assert chunks == ["chunk"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=0, max_size=8))
def test_waterfall_order_matches_registration_and_prepend(prepends: list[bool]) -> None:
    """R10: appended listeners keep registration order; each prepend jumps to the front."""
    expected: list[int] = []
    for i, prepend in enumerate(prepends):
        if prepend:
            expected.insert(0, i)
        else:
            expected.append(i)

    async def run() -> list[int]:
        order: list[int] = []
        async with Context() as ctx:
            for i, prepend in enumerate(prepends):

                def listener(nxt: Callable[[], Any], i: int = i) -> Any:
                    order.append(i)
                    return nxt()

                ctx.on("w", listener, prepend=prepend)
            ctx.waterfall("w", inner=lambda: None)
        return order

    assert anyio.run(run) == expected


async def test_on_returns_a_remover_of_exactly_that_registration() -> None:
    calls: list[str] = []

    def listener() -> None:
        calls.append("x")

    async with Context() as ctx:
        off = ctx.on("e", listener)
        ctx.on("e", listener)
        off()
        off()
        ctx.emit("e")
    assert calls == ["x"]


async def test_emit_contains_listener_failures(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[Any] = []

    def broken(value: int) -> None:
        raise RuntimeError("observer failed")

    with caplog.at_level(logging.ERROR, logger="framework.events"):
        async with Context() as ctx:
            ctx.on("e", broken)
            ctx.on("e", calls.append)
            ctx.emit("e", 1)
    assert calls == [1]
    assert 'listener of "e" failed' in caplog.text
    assert "observer failed" in caplog.text


async def test_emit_does_not_await_async_listeners() -> None:
    done = anyio.Event()
    log: list[str] = []

    async def slow() -> None:
        log.append("started")
        await anyio.sleep(0.001)
        done.set()

    async with Context() as ctx:
        ctx.on("e", slow)
        ctx.emit("e")
        log.append("emit returned")
        with anyio.fail_after(1):
            await done.wait()
    assert log == ["emit returned", "started"]


async def test_parallel_runs_listeners_concurrently() -> None:
    started: list[str] = []
    both = anyio.Event()

    def make(label: str) -> Callable[[], Any]:
        async def listener() -> None:
            started.append(label)
            if {"a", "b"} <= set(started):
                both.set()
            await both.wait()

        return listener

    async with Context() as ctx:
        ctx.on("p", make("a"))
        ctx.on("p", make("b"))
        ctx.on("p", lambda: started.append("sync"))
        with anyio.fail_after(1):
            await ctx.parallel("p")
    assert sorted(started) == ["a", "b", "sync"]


async def test_parallel_raises_one_failure_as_itself() -> None:
    async with Context() as ctx:
        ctx.on("p", lambda: None)

        async def fail() -> None:
            raise KeyError("one")

        ctx.on("p", fail)
        with pytest.raises(KeyError):
            await ctx.parallel("p")


async def test_parallel_raises_several_failures_as_a_group() -> None:
    async with Context() as ctx:

        async def fail_a() -> None:
            raise KeyError("a")

        def fail_b() -> None:
            raise ValueError("b")

        ctx.on("p", fail_a)
        ctx.on("p", fail_b)
        with pytest.raises(ExceptionGroup) as info:
            await ctx.parallel("p")
        assert [type(e) for e in info.value.exceptions] == [KeyError, ValueError]


@pytest.mark.parametrize("bailing", [0, "", "value", True])
async def test_serial_returns_the_first_result_not_none_or_false(bailing: object) -> None:
    later: list[str] = []
    async with Context() as ctx:
        ctx.on("s", lambda: None)

        async def falsy() -> bool:
            return False

        ctx.on("s", falsy)

        async def answer() -> object:
            return bailing

        ctx.on("s", answer)
        ctx.on("s", lambda: later.append("called"))
        assert await ctx.serial("s") == bailing
    assert later == []


async def test_serial_and_bail_return_none_when_nobody_answers() -> None:
    async with Context() as ctx:
        ctx.on("s", lambda: False)
        assert await ctx.serial("s") is None
        assert ctx.bail("s") is None


async def test_bail_is_synchronous_serial() -> None:
    async with Context() as ctx:
        ctx.on("b", lambda x: None)
        ctx.on("b", lambda x: x * 2)
        ctx.on("b", lambda x: x * 3)
        assert ctx.bail("b", 5) == 10


async def test_restarted_plugin_reappends_its_listeners_at_the_end() -> None:
    log: list[str] = []

    def make(label: str, *inject: str) -> Any:
        def apply(ctx: Context, config: object) -> None:
            ctx.on("w", tracer(log, label))

        apply.inject = list(inject)  # type: ignore[attr-defined]
        return apply

    async with Context() as ctx:
        source = ctx.plugin(lambda ctx, config: ctx.provide("dep", 1))
        await source
        first = ctx.plugin(make("A", "dep"))
        await ctx.settle()
        await ctx.plugin(make("B"))
        ctx.waterfall("w", inner=lambda: None)
        assert log[:2] == ["A-in", "B-in"]
        await source.dispose()
        assert first.state is FiberState.PENDING
        ctx.plugin(lambda ctx, config: ctx.provide("dep", 2))
        await ctx.settle()
        log.clear()
        ctx.waterfall("w", inner=lambda: None)
        assert log[:2] == ["B-in", "A-in"]


async def test_listener_registered_during_dispatch_waits_for_the_next_one() -> None:
    calls: list[str] = []
    async with Context() as ctx:

        def first() -> None:
            calls.append("first")
            ctx.on("e", lambda: calls.append("late"))

        ctx.on("e", first)
        ctx.emit("e")
        assert calls == ["first"]


async def test_emit_logs_a_failing_async_listener(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("async observer failed")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            ctx.on("e", broken)
            ctx.emit("e")
            await anyio.sleep(0.01)
    assert 'listener of "e" failed' in caplog.text
    assert "async observer failed" in caplog.text
