"""Root context lifecycle: entering, background loading, teardown order, fiber states."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from framework import Context, FiberState, FrameworkError

pytestmark = pytest.mark.anyio


async def until(predicate: Callable[[], bool]) -> None:
    with anyio.fail_after(1):
        while not predicate():
            await anyio.lowlevel.checkpoint()


async def test_apply_never_runs_inside_plugin_call() -> None:
    calls: list[str] = []
    async with Context() as ctx:
        fiber = ctx.plugin(lambda ctx, config: calls.append("apply"))
        assert calls == []
        assert fiber.state is FiberState.PENDING
        await fiber
        assert calls == ["apply"]
        assert fiber.state is FiberState.ACTIVE


async def test_await_fiber_waits_for_async_apply() -> None:
    async def slow(ctx: Context, config: object) -> None:
        await anyio.sleep(0.01)

    async with Context() as ctx:
        fiber = ctx.plugin(slow)
        await until(lambda: fiber.state is FiberState.LOADING)
        await fiber
        assert fiber.state is FiberState.ACTIVE


async def test_fiber_name_and_ctx() -> None:
    def my_plugin(ctx: Context, config: object) -> None:
        pass

    async with Context() as ctx:
        fiber = ctx.plugin(my_plugin)
        assert fiber.name == "my_plugin"
        assert fiber.ctx.fiber is fiber
        assert fiber.ctx is not ctx


async def test_leaving_disposes_children_before_parents_in_reverse_order() -> None:
    order: list[str] = []

    def leaf(label: str):  # type: ignore[no-untyped-def]
        def apply(ctx: Context, config: object) -> object:
            return lambda: order.append(label)

        apply.__name__ = label
        return apply

    def parent(ctx: Context, config: object) -> object:
        ctx.plugin(leaf("child1"))
        ctx.plugin(leaf("child2"))
        return lambda: order.append("parent")

    async with Context() as ctx:
        first = ctx.plugin(leaf("first"))
        tree = ctx.plugin(parent)
        last = ctx.plugin(leaf("last"))
        await ctx.settle()
        assert {first.state, tree.state, last.state} == {FiberState.ACTIVE}
    assert order == ["last", "child2", "child1", "parent", "first"]
    assert {first.state, tree.state, last.state} == {FiberState.DISPOSED}


async def test_dispose_is_idempotent_and_disposes_children() -> None:
    disposed: list[str] = []
    children = []

    def child(ctx: Context, config: object) -> object:
        return lambda: disposed.append("child")

    def parent(ctx: Context, config: object) -> object:
        children.append(ctx.plugin(child))
        return lambda: disposed.append("parent")

    async with Context() as ctx:
        fiber = ctx.plugin(parent)
        await ctx.settle()
        await fiber.dispose()
        await fiber.dispose()
        assert disposed == ["child", "parent"]
        assert fiber.state is FiberState.DISPOSED
        assert children[0].state is FiberState.DISPOSED
    assert disposed == ["child", "parent"]


async def test_disposing_a_loading_fiber_cancels_its_apply() -> None:
    reached: list[str] = []

    async def forever(ctx: Context, config: object) -> None:
        ctx.effect(lambda: lambda: reached.append("undone"))
        await anyio.sleep_forever()

    async with Context() as ctx:
        fiber = ctx.plugin(forever)
        await until(lambda: fiber.state is FiberState.LOADING)
        with anyio.fail_after(1):
            await fiber.dispose()
        assert fiber.state is FiberState.DISPOSED
        assert reached == ["undone"]


async def test_plugin_on_disposed_context_is_refused() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(lambda ctx, config: None)
        await fiber
        await fiber.dispose()
        with pytest.raises(FrameworkError, match="cannot create effect on inactive context"):
            fiber.ctx.plugin(lambda ctx, config: None)


async def test_root_context_can_be_entered_only_once() -> None:
    async with Context() as ctx:
        with pytest.raises(FrameworkError):
            await ctx.__aenter__()


async def test_settle_waits_for_chained_loading() -> None:
    seen: list[str] = []

    async def provider(ctx: Context, config: object) -> None:
        await anyio.sleep(0.01)
        ctx.provide("thing", object())

    def consumer(ctx: Context, config: object) -> None:
        seen.append("consumer")

    consumer.inject = ["thing"]  # type: ignore[attr-defined]

    async with Context() as ctx:
        ctx.plugin(consumer)
        ctx.plugin(provider)
        await ctx.settle()
        assert seen == ["consumer"]


async def test_dispose_completes_even_when_the_caller_is_cancelled() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: object) -> object:
        async def slow_disposer() -> None:
            await anyio.sleep(0.01)
            log.append("disposed")

        return slow_disposer

    async with Context() as ctx:
        fiber = ctx.plugin(plugin)
        await fiber
        with anyio.CancelScope() as scope:
            scope.cancel()
            await fiber.dispose()
        assert log == ["disposed"]
        assert fiber.state is FiberState.DISPOSED


async def test_emit_after_the_root_closed_drops_async_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def listener() -> None:
        ran.append("ran")

    async with Context() as ctx:
        ctx.on("e", listener)
        root = ctx
    root._root.bus.add("e", listener, None, False)
    root.emit("e")
    assert ran == []
    assert 'listener of "e": background work dropped, the root is closed' in caplog.text


async def test_a_plugin_may_dispose_itself_from_its_apply() -> None:
    log: list[str] = []

    async def one_shot(ctx: Context, config: object) -> None:
        ctx.effect(lambda: lambda: log.append("undone"))
        await ctx.fiber.dispose()
        log.append("after dispose")
        await anyio.lowlevel.checkpoint()
        log.append("not reached")

    async with Context() as ctx:
        fiber = ctx.plugin(one_shot)
        with anyio.fail_after(1):
            await fiber
        assert fiber.state is FiberState.DISPOSED
        assert log == ["after dispose", "undone"]


async def test_a_disposer_may_dispose_its_own_unloading_fiber() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: object) -> object:
        async def disposer() -> None:
            log.append("disposer")
            await ctx.fiber.dispose()

        return disposer

    plugin.inject = ["dep"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        source = ctx.plugin(lambda ctx, config: ctx.provide("dep", 1))
        fiber = ctx.plugin(plugin)
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        with anyio.fail_after(1):
            await source.dispose()
            await ctx.settle()
        assert fiber.state is FiberState.DISPOSED
        assert log == ["disposer"]


def test_plugin_before_entering_the_root_is_refused() -> None:
    with pytest.raises(FrameworkError, match="enter the root context"):
        Context().plugin(lambda ctx, config: None)


async def test_an_exception_from_the_body_propagates_unwrapped() -> None:
    with pytest.raises(KeyError, match="body"):
        async with Context():
            raise KeyError("body")


async def test_base_dir_is_given_to_a_plugin_and_inherited_by_its_children(tmp_path: Path) -> None:
    seen: dict[str, object] = {}

    def child(ctx: Context, _config: object) -> None:
        seen["child"] = ctx.base_dir

    def parent(ctx: Context, _config: object) -> None:
        seen["parent"] = ctx.base_dir
        ctx.plugin(child)

    async with Context() as root:
        assert root.base_dir is None
        await root.plugin(parent, base_dir=tmp_path)
        await root.settle()
    assert seen == {"parent": tmp_path, "child": tmp_path}
