"""Plugin shapes, apply results, failures and Config validation."""

from __future__ import annotations

import logging
import types
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from framework import ConfigError, Context, FiberState, PluginError, Service

pytestmark = pytest.mark.anyio


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 1
    label: str = "x"


def namespace(apply: Any, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType("plugins.fake")
    module.name = "fake"  # type: ignore[attr-defined]
    module.apply = apply  # type: ignore[attr-defined]
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


async def test_namespace_module_plugin_gets_validated_config() -> None:
    received: list[Any] = []
    module = namespace(lambda ctx, config: received.append(config), Config=Settings)
    async with Context() as ctx:
        fiber = ctx.plugin(module, {"size": 3})
        await fiber
        assert fiber.name == "fake"
        assert received == [Settings(size=3)]


async def test_missing_config_validates_as_empty_mapping() -> None:
    received: list[Any] = []
    async with Context() as ctx:
        await ctx.plugin(namespace(lambda ctx, config: received.append(config), Config=Settings))
    assert received == [Settings()]


async def test_plugin_without_config_receives_raw_value() -> None:
    received: list[Any] = []
    module = namespace(lambda ctx, config: received.append(config))
    async with Context() as ctx:
        await ctx.plugin(module, {"anything": [1]})
        await ctx.plugin(module)
    assert received == [{"anything": [1]}, None]


async def test_invalid_config_fails_with_one_line_per_problem() -> None:
    module = namespace(lambda ctx, config: None, Config=Settings)
    async with Context() as ctx:
        fiber = ctx.plugin(module, {"size": "big", "extra": 1})
        with pytest.raises(ConfigError) as info:
            await fiber
        assert fiber.state is FiberState.FAILED
        assert fiber.error is info.value
    assert str(info.value) == (
        "invalid config:\n"
        "  - Input should be a valid integer, unable to parse string as an integer (at size)\n"
        "  - Extra inputs are not permitted (at extra)"
    )


async def test_non_mapping_config_is_a_config_error() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(namespace(lambda ctx, config: None, Config=Settings), [1, 2])
        with pytest.raises(ConfigError, match=r"^invalid config:\n  - .* \(at <root>\)$"):
            await fiber


async def test_config_is_validated_at_every_activation() -> None:
    validations: list[int] = []

    class Counted(BaseModel):
        n: int = 0

        @field_validator("n")
        @classmethod
        def count(cls, value: int) -> int:
            validations.append(value)
            return value

    module = namespace(lambda ctx, config: None, Config=Counted, inject=["dep"])
    async with Context() as ctx:
        fiber = ctx.plugin(module, {"n": 5})
        first = ctx.plugin(lambda ctx, config: ctx.provide("dep", 1))
        await ctx.settle()
        assert validations == [5]
        await first.dispose()
        ctx.plugin(lambda ctx, config: ctx.provide("dep", 2))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        assert validations == [5, 5]


async def test_class_plugin_is_instantiated_with_ctx_and_config() -> None:
    made: list[Any] = []

    class Thing:
        name = "thing"
        Config = Settings

        def __init__(self, ctx: Context, config: Settings) -> None:
            made.append((ctx, config))

    async with Context() as ctx:
        fiber = ctx.plugin(Thing, {"label": "y"})
        await fiber
        assert fiber.name == "thing"
        assert made == [(fiber.ctx, Settings(label="y"))]


async def test_service_class_plugin_provides_itself() -> None:
    class Store(Service):
        provide = "store"

    async with Context() as ctx:
        fiber = ctx.plugin(Store)
        await fiber
        assert isinstance(ctx.store, Store)
        assert ctx.store.ctx is fiber.ctx
        await fiber.dispose()
        assert ctx.get("store") is None


async def test_async_apply_and_sync_or_async_disposers() -> None:
    log: list[str] = []

    async def sync_disposer_plugin(ctx: Context, config: object) -> Any:
        await anyio.lowlevel.checkpoint()
        return lambda: log.append("sync")

    def async_disposer_plugin(ctx: Context, config: object) -> Any:
        async def dispose() -> None:
            await anyio.lowlevel.checkpoint()
            log.append("async")

        return dispose

    async with Context() as ctx:
        a = ctx.plugin(sync_disposer_plugin)
        b = ctx.plugin(async_disposer_plugin)
        await ctx.settle()
        await a.dispose()
        await b.dispose()
    assert log == ["sync", "async"]


async def test_invalid_effect_fails_the_plugin() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(lambda ctx, config: 42)
        with pytest.raises(TypeError, match=r"^invalid effect 42"):
            await fiber
        assert fiber.state is FiberState.FAILED


async def test_exception_in_apply_is_logged_and_partial_effects_undone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    undone: list[str] = []

    def broken(ctx: Context, config: object) -> None:
        ctx.effect(lambda: lambda: undone.append("effect"))
        ctx.on("evt", lambda: "still here")
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="framework"):
        async with Context() as ctx:
            fiber = ctx.plugin(broken)
            with pytest.raises(RuntimeError, match="boom"):
                await fiber
            assert fiber.state is FiberState.FAILED
            assert isinstance(fiber.error, RuntimeError)
            assert undone == ["effect"]
            assert ctx.bail("evt") is None
    assert 'plugin "broken" failed: boom' in caplog.text


async def test_non_plugin_is_refused_synchronously() -> None:
    async with Context() as ctx:
        with pytest.raises(PluginError, match="is not a plugin"):
            ctx.plugin(42)


async def test_function_plugin_inject_attribute_is_honoured() -> None:
    def user(ctx: Context, config: object) -> None:
        pass

    user.inject = ["needed"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        fiber = ctx.plugin(user)
        await fiber
        assert fiber.state is FiberState.PENDING
        assert fiber.waiting_for() == ["needed"]


async def test_inject_keyword_adds_required_services() -> None:
    loaded: list[str] = []
    async with Context() as ctx:
        fiber = ctx.plugin(lambda ctx, config: loaded.append("x"), inject=["extra"])
        await fiber
        assert fiber.state is FiberState.PENDING
        assert fiber.inject == ("extra",)
        await ctx.plugin(lambda ctx, config: ctx.provide("extra", 1))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
    assert loaded == ["x"]


def test_fiber_states_are_the_binding_six() -> None:
    assert [state.name for state in FiberState] == [
        "PENDING",
        "LOADING",
        "ACTIVE",
        "FAILED",
        "DISPOSED",
        "UNLOADING",
    ]


async def test_a_failing_plugin_is_applied_once_until_a_provider_it_injects_changes() -> None:
    """Its provider activating while it waits to load schedules it twice; it fails once."""
    calls: list[object] = []

    def provider(ctx: Context, config: object) -> None:
        ctx.provide("thing", 1)

    def failing(ctx: Context, config: object) -> None:
        calls.append(ctx.thing)
        raise RuntimeError("boom")

    failing.inject = ["thing"]  # type: ignore[attr-defined]

    def replacement(ctx: Context, config: object) -> None:
        ctx.provide("thing", 2)

    async with Context() as ctx:
        first = ctx.plugin(provider)
        fiber = ctx.plugin(failing)
        await ctx.settle()
        assert fiber.state is FiberState.FAILED
        assert calls == [1]
        await first.dispose()
        ctx.plugin(replacement)
        await ctx.settle()
        assert calls == [1, 2]  # another provider: one retry
        assert fiber.state is FiberState.FAILED
