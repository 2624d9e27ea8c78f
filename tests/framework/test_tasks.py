"""Background tasks: `ctx.spawn` and `ctx.start` (owned by the caller's fiber, run by the root)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskStatus

from framework import Context, FrameworkError

pytestmark = pytest.mark.anyio


async def _mounted(ctx: Context, name: str = "worker") -> Context:
    """A plugin's context (an active fiber named `name`)."""
    seen: list[Context] = []

    def plugin(child: Context, config: object) -> None:
        seen.append(child)

    plugin.__name__ = name
    await ctx.plugin(plugin)
    return seen[0]


async def test_spawn_returns_at_once_and_runs_the_task_with_its_arguments() -> None:
    ran = anyio.Event()
    got: list[object] = []

    async def task(a: int, b: str) -> None:
        got.append((a, b))
        ran.set()

    async with Context() as ctx:
        child = await _mounted(ctx)
        child.spawn(task, 1, "x")
        assert got == []  # not run inside the call
        with anyio.fail_after(5):
            await ran.wait()
    assert got == [(1, "x")]


async def test_a_failing_task_is_logged_with_the_plugin_name_and_contained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = anyio.Event()

    async def boom() -> None:
        raise ValueError("kaput")

    async def survivor() -> None:
        await anyio.lowlevel.checkpoint()
        after.set()

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            child = await _mounted(ctx, "flaky")
            child.spawn(boom, name="boom-task")
            child.spawn(survivor)
            with anyio.fail_after(5):
                await after.wait()
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert child.fiber.state.name == "ACTIVE"
    assert 'background task "boom-task" of plugin "flaky" failed' in caplog.text
    assert "ValueError: kaput" in caplog.text


async def test_the_default_task_name_is_the_functions_qualified_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing() -> None:
        raise RuntimeError("no")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            ctx.spawn(failing)
            await anyio.sleep(0.01)
    assert f'background task "{failing.__qualname__}" of plugin "root" failed' in caplog.text


async def test_disposing_the_fiber_cancels_the_task_and_waits_for_it_to_end() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)  # teardown waits for this cleanup
            log.append("cleaned up")

    async with Context() as ctx:
        child = await _mounted(ctx)
        child.spawn(forever)
        with anyio.fail_after(5):
            await started.wait()
        await child.fiber.dispose()
        assert log == ["cleaned up"]
        assert ctx.fiber.state.name == "ACTIVE"  # the root is unaffected


async def test_a_task_is_torn_down_in_its_place_among_the_fibers_effects() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            log.append("task")

    def plugin(ctx: Context, config: object) -> None:
        ctx.effect(lambda: lambda: log.append("before"))
        ctx.spawn(forever)
        ctx.effect(lambda: lambda: log.append("after"))

    async with Context() as ctx:
        fiber = ctx.plugin(plugin)
        await fiber
        with anyio.fail_after(5):
            await started.wait()
        await fiber.dispose()
    assert log == ["after", "task", "before"]


async def test_leaving_the_root_cancels_tasks_of_the_root_and_of_plugins() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def forever(label: str) -> None:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            log.append(label)

    with anyio.fail_after(5):
        async with Context() as ctx:
            child = await _mounted(ctx)
            ctx.spawn(forever, "root")
            child.spawn(forever, "plugin")
            await started.wait()
            await anyio.lowlevel.checkpoint()
    assert sorted(log) == ["plugin", "root"]


async def test_a_finished_task_is_no_longer_an_effect_of_its_fiber() -> None:
    done = anyio.Event()

    async def quick() -> None:
        done.set()

    async with Context() as ctx:
        child = await _mounted(ctx)
        before = len(child.fiber._effects)
        child.spawn(quick)
        assert len(child.fiber._effects) == before + 1
        await done.wait()
        await anyio.lowlevel.checkpoint()
        assert len(child.fiber._effects) == before


async def test_a_task_may_dispose_its_own_fiber() -> None:
    log: list[str] = []
    ended = anyio.Event()

    async def suicide(ctx: Context) -> None:
        try:
            await ctx.fiber.dispose()
            log.append("disposed")
            await anyio.sleep_forever()  # cancelled: it belonged to the fiber
        finally:
            log.append("ended")
            ended.set()

    async with Context() as ctx:
        child = await _mounted(ctx)
        child.spawn(suicide, child)
        with anyio.fail_after(5):
            await ended.wait()
        assert child.fiber.state.name == "DISPOSED"
    assert log == ["disposed", "ended"]


async def test_spawn_refuses_an_inactive_context_and_an_unentered_root() -> None:
    async def task() -> None:
        raise AssertionError("must not run")

    with pytest.raises(FrameworkError, match="before tasks"):
        Context().spawn(task)
    async with Context() as ctx:
        child = await _mounted(ctx)
        await child.fiber.dispose()
        with pytest.raises(FrameworkError, match="cannot create effect on inactive context"):
            child.spawn(task)
        with pytest.raises(FrameworkError, match="cannot create effect on inactive context"):
            await child.start(task)
    with pytest.raises(FrameworkError, match="cannot create effect on inactive context"):
        ctx.spawn(task)


async def test_start_returns_the_started_value_and_the_task_keeps_running() -> None:
    release = anyio.Event()
    served = anyio.Event()
    log: list[str] = []

    async def serve(prefix: str, *, task_status: TaskStatus[str]) -> None:
        task_status.started(f"{prefix}-ready")
        await release.wait()
        log.append("served")
        served.set()

    async with Context() as ctx:
        child = await _mounted(ctx)
        assert await child.start(serve, "svc") == "svc-ready"
        assert log == []
        release.set()
        with anyio.fail_after(5):
            await served.wait()
    assert log == ["served"]


async def test_start_raises_a_failure_before_started_in_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*, task_status: TaskStatus[None]) -> None:
        raise ValueError("cannot start")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            child = await _mounted(ctx)
            before = len(child.fiber._effects)
            with pytest.raises(ValueError, match="cannot start"):
                await child.start(broken)
            assert len(child.fiber._effects) == before
            assert child.fiber.state.name == "ACTIVE"
    assert "background task" not in caplog.text


async def test_start_logs_and_contains_a_failure_after_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def later(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await anyio.lowlevel.checkpoint()
        raise ValueError("after start")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            child = await _mounted(ctx, "host")
            await child.start(later, name="later")
            await anyio.sleep(0.01)
            assert child.fiber.state.name == "ACTIVE"
    assert 'background task "later" of plugin "host" failed' in caplog.text


async def test_disposing_the_fiber_before_started_fails_the_start() -> None:
    async def slow(*, task_status: TaskStatus[None]) -> None:
        await anyio.sleep_forever()

    async with Context() as ctx:
        child = await _mounted(ctx, "slowpoke")
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:

                async def starter() -> None:
                    with pytest.raises(FrameworkError, match="cancelled before it started"):
                        await child.start(slow)

                tg.start_soon(starter)
                await anyio.sleep(0.01)
                await child.fiber.dispose()


async def test_a_started_task_is_cancelled_with_its_fiber() -> None:
    log: list[str] = []

    async def host(*, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                log.append("host closed")
                tg.cancel_scope.cancel()

    async with Context() as ctx:
        child = await _mounted(ctx)
        await child.start(host)
        await child.fiber.dispose()
        assert log == ["host closed"]


def test_tasks_run_on_trio_without_asyncio() -> None:
    import trio

    log: list[Any] = []

    async def main() -> None:
        async def ready(*, task_status: TaskStatus[int]) -> None:
            log.append(trio.lowlevel.current_task().name)
            task_status.started(7)
            await anyio.sleep_forever()

        async with Context() as ctx:
            log.append(await ctx.start(ready, name="ready-task"))

    trio.run(main)
    assert log == ["ready-task", 7]
