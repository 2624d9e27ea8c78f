"""Effects: setup results, teardown order, undo handles, inactive contexts."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from framework import Context, FrameworkError

pytestmark = pytest.mark.anyio


async def test_disposers_of_one_effect_run_in_reverse() -> None:
    log: list[str] = []
    async with Context() as ctx:
        effect = ctx.effect(lambda: [lambda: log.append("a"), lambda: log.append("b")])
        assert effect() is None
        assert effect() is None
    assert log == ["b", "a"]


async def test_effects_of_a_fiber_are_torn_down_in_reverse_registration_order() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: object) -> None:
        for label in "abc":

            def setup(label: str = label) -> Any:
                return lambda: log.append(label)

            ctx.effect(setup)

    async with Context() as ctx:
        fiber = ctx.plugin(plugin)
        await fiber
        await fiber.dispose()
    assert log == ["c", "b", "a"]


async def test_async_setup_and_async_disposers_run_one_after_another() -> None:
    log: list[str] = []

    def disposer(label: str) -> Any:
        async def dispose() -> None:
            log.append(f"{label} start")
            await anyio.lowlevel.checkpoint()
            log.append(f"{label} end")

        return dispose

    async def setup() -> list[Any]:
        await anyio.lowlevel.checkpoint()
        return [disposer("a"), lambda: log.append("sync"), disposer("b")]

    async with Context() as ctx:
        effect = await ctx.effect(setup)
        pending = effect()
        assert pending is not None
        await pending
    assert log == ["b start", "b end", "sync", "a start", "a end"]


async def test_undoing_an_effect_early_removes_it_from_teardown() -> None:
    log: list[str] = []

    def plugin(ctx: Context, config: object) -> None:
        undo = ctx.effect(lambda: lambda: log.append("once"))
        undo()

    async with Context() as ctx:
        fiber = ctx.plugin(plugin)
        await fiber
        await fiber.dispose()
    assert log == ["once"]


async def test_effect_on_inactive_context_is_refused() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(lambda ctx, config: None)
        await fiber
        await fiber.dispose()
        with pytest.raises(FrameworkError) as info:
            fiber.ctx.effect(lambda: None)
        assert str(info.value) == "cannot create effect on inactive context"
        with pytest.raises(FrameworkError):
            fiber.ctx.on("e", lambda: None)


async def test_effect_during_unloading_is_refused() -> None:
    errors: list[str] = []

    def plugin(ctx: Context, config: object) -> Any:
        def late() -> None:
            try:
                ctx.effect(lambda: None)
            except FrameworkError as exc:
                errors.append(str(exc))

        return late

    async with Context() as ctx:
        fiber = ctx.plugin(plugin)
        await fiber
        await fiber.dispose()
    assert errors == ["cannot create effect on inactive context"]


async def test_invalid_setup_result_is_a_type_error() -> None:
    async with Context() as ctx:
        with pytest.raises(TypeError, match="invalid effect"):
            ctx.effect(lambda: 3)  # type: ignore[arg-type,return-value]


async def test_failing_disposer_is_logged_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []

    def boom() -> None:
        raise RuntimeError("disposer broke")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            ctx.effect(lambda: [lambda: log.append("first"), boom])
    assert log == ["first"]
    assert "disposer broke" in caplog.text
