"""Services: provide, injection lifecycle, bound views, owner tracing, realms, overrides."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from dependency_injector import providers

from framework import Context, FiberState, Service, ServiceError

pytestmark = pytest.mark.anyio


class Registry(Service):
    provide = "registry"

    def __init__(self, ctx: Context, config: Any = None) -> None:
        super().__init__(ctx, config)
        self.items: list[str] = []

    def register(self, item: str) -> Any:
        def setup() -> Any:
            self.items.append(item)
            return lambda: self.items.remove(item)

        return self.caller.effect(setup)


def provider(name: str, value: object, label: str = "provider") -> Any:
    def apply(ctx: Context, config: object) -> None:
        ctx.provide(name, value)

    apply.__name__ = label
    return apply


def consumer(*inject: str, log: list[Any] | None = None, read: str | None = None) -> Any:
    def apply(ctx: Context, config: object) -> Any:
        if log is not None:
            log.append(getattr(ctx, read) if read else "loaded")
            return lambda: log.append("unloaded")
        return None

    apply.inject = list(inject)  # type: ignore[attr-defined]
    return apply


async def test_duplicate_provide_names_the_first_provider() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("thing", 1, "first"))
        fiber = ctx.plugin(provider("thing", 2, "second"))
        with pytest.raises(ServiceError) as info:
            await fiber
        assert str(info.value) == 'service "thing" has been registered at first'


async def test_plugin_waits_pending_for_a_service_then_loads() -> None:
    log: list[Any] = []
    async with Context() as ctx:
        fiber = ctx.plugin(consumer("thing", log=log, read="thing"))
        await fiber
        assert fiber.state is FiberState.PENDING
        assert log == []
        await ctx.plugin(provider("thing", "value"))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        assert log == ["value"]


async def test_dependents_start_after_the_providers_whole_apply() -> None:
    order: list[str] = []

    async def slow_provider(ctx: Context, config: object) -> None:
        ctx.provide("thing", 1)
        await anyio.sleep(0.01)
        order.append("provider done")

    def dependent(ctx: Context, config: object) -> None:
        order.append("dependent")

    dependent.inject = ["thing"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        ctx.plugin(dependent)
        ctx.plugin(slow_provider)
        await ctx.settle()
    assert order == ["provider done", "dependent"]


async def test_dependent_goes_pending_when_service_disappears() -> None:
    log: list[Any] = []
    async with Context() as ctx:
        fiber = ctx.plugin(consumer("thing", log=log))
        source = ctx.plugin(provider("thing", 1))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        await source.dispose()
        assert log == ["loaded", "unloaded"]
        assert fiber.state is FiberState.PENDING
        assert fiber.waiting_for() == ["thing"]


async def test_dependent_unloads_before_the_provider_tears_down() -> None:
    order: list[str] = []

    def source(ctx: Context, config: object) -> Any:
        ctx.provide("thing", 1)
        return lambda: order.append("provider")

    def user(ctx: Context, config: object) -> Any:
        return lambda: order.append(f"user saw {ctx.get('thing')}")

    user.inject = ["thing"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        first = ctx.plugin(source)
        ctx.plugin(user)
        await ctx.settle()
        await first.dispose()
    assert order == ["user saw 1", "provider"]


async def test_provider_swap_reloads_the_dependent() -> None:
    log: list[Any] = []
    async with Context() as ctx:
        fiber = ctx.plugin(consumer("thing", log=log, read="thing"))
        first = ctx.plugin(provider("thing", "A"))
        await ctx.settle()
        await first.dispose()
        ctx.plugin(provider("thing", "B"))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        assert log == ["A", "unloaded", "B"]


async def test_failed_fiber_is_retried_when_its_service_changes() -> None:
    def picky(ctx: Context, config: object) -> None:
        if ctx.thing != "good":
            raise ValueError(f"bad {ctx.thing}")

    picky.inject = ["thing"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        fiber = ctx.plugin(picky)
        bad = ctx.plugin(provider("thing", "worse"))
        await ctx.settle()
        assert fiber.state is FiberState.FAILED
        assert str(fiber.error) == "bad worse"
        await bad.dispose()
        await ctx.settle()
        assert fiber.state is FiberState.PENDING
        ctx.plugin(provider("thing", "good"))
        await ctx.settle()
        assert fiber.state is FiberState.ACTIVE
        assert fiber.error is None


async def test_failed_fiber_without_service_change_stays_failed() -> None:
    attempts: list[int] = []

    def flaky(ctx: Context, config: object) -> None:
        attempts.append(1)
        raise ValueError("no")

    async with Context() as ctx:
        fiber = ctx.plugin(flaky)
        await ctx.settle()
        ctx.plugin(provider("unrelated", 1))
        await ctx.settle()
        assert fiber.state is FiberState.FAILED
        assert attempts == [1]


async def test_reading_without_inject_is_an_error() -> None:
    errors: list[str] = []

    def nosy(ctx: Context, config: object) -> None:
        try:
            ctx.thing  # noqa: B018
        except ServiceError as exc:
            errors.append(str(exc))

    async with Context() as ctx:
        await ctx.plugin(provider("thing", 1))
        await ctx.plugin(nosy)
    assert errors == ['cannot get property "thing" without inject']


async def test_ancestor_inject_allows_reading() -> None:
    seen: list[Any] = []

    def child(ctx: Context, config: object) -> None:
        seen.append(ctx.thing)

    def parent(ctx: Context, config: object) -> None:
        ctx.plugin(child)

    parent.inject = ["thing"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        ctx.plugin(parent)
        ctx.plugin(provider("thing", 7))
        await ctx.settle()
    assert seen == [7]


async def test_reading_an_injected_service_of_an_inactive_provider_is_an_error() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(consumer("thing"))
        source = ctx.plugin(provider("thing", 1))
        await ctx.settle()
        assert fiber.ctx.thing == 1
        await source.dispose()
        with pytest.raises(ServiceError) as info:
            fiber.ctx.thing  # noqa: B018
        assert str(info.value) == 'cannot get required service "thing" in inactive context'


async def test_root_missing_service_is_attribute_error() -> None:
    async with Context() as ctx:
        with pytest.raises(AttributeError):
            ctx.sessions  # noqa: B018
        with pytest.raises(AttributeError):
            ctx.not_a_service_name  # noqa: B018
        assert ctx.get("sessions") is None


async def test_get_reads_optional_services_without_inject() -> None:
    seen: list[Any] = []

    def optional(ctx: Context, config: object) -> None:
        seen.append(ctx.get("thing"))

    async with Context() as ctx:
        await ctx.plugin(optional)
        await ctx.plugin(provider("thing", 3))
        await ctx.plugin(optional)
    assert seen == [None, 3]


async def test_bound_views_are_per_context_and_share_state() -> None:
    async with Context() as ctx:
        fiber = ctx.plugin(Registry)
        user = ctx.plugin(consumer("registry"))
        await ctx.settle()
        view = user.ctx.registry
        assert view.caller is user.ctx
        assert view.ctx is fiber.ctx
        assert user.ctx.registry is view
        assert ctx.registry is not view
        assert ctx.registry.caller is ctx
        assert view.items is ctx.registry.items


async def test_registration_through_a_service_is_undone_with_its_plugin() -> None:
    def registrant(ctx: Context, config: object) -> None:
        ctx.registry.register("tool")

    registrant.inject = ["registry"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        ctx.plugin(Registry)
        fiber = ctx.plugin(registrant)
        await ctx.settle()
        assert ctx.registry.items == ["tool"]
        await fiber.dispose()
        assert ctx.registry.items == []


async def test_dispose_removes_listeners_services_and_registrations() -> None:
    def everything(ctx: Context, config: object) -> None:
        ctx.on("evt", lambda: "heard")
        ctx.provide("extra", object())
        ctx.registry.register("tool")

    everything.inject = ["registry"]  # type: ignore[attr-defined]
    async with Context() as ctx:
        ctx.plugin(Registry)
        fiber = ctx.plugin(everything)
        await ctx.settle()
        assert ctx.bail("evt") == "heard"
        assert ctx.get("extra") is not None
        await fiber.dispose()
        assert ctx.bail("evt") is None
        assert ctx.get("extra") is None
        assert ctx.registry.items == []


async def test_private_isolation_realms() -> None:
    seen: dict[str, Any] = {}

    def group(label: str) -> Any:
        def apply(ctx: Context, config: object) -> None:
            ctx.plugin(provider("thing", label))

            def user(ctx: Context, config: object) -> None:
                seen[label] = ctx.thing

            user.inject = ["thing"]  # type: ignore[attr-defined]
            ctx.plugin(user)

        return apply

    async with Context() as ctx:
        ctx.plugin(group("a"), isolate={"thing": True})
        ctx.plugin(group("b"), isolate={"thing": True})
        await ctx.settle()
        assert seen == {"a": "a", "b": "b"}
        assert ctx.get("thing") is None


async def test_labelled_realm_is_shared_by_rows_with_the_label() -> None:
    log: list[Any] = []
    async with Context() as ctx:
        ctx.plugin(provider("thing", "shared"), isolate={"thing": "grp"})
        inside = ctx.plugin(consumer("thing", log=log, read="thing"), isolate={"thing": "grp"})
        outside = ctx.plugin(consumer("thing"))
        await ctx.settle()
        assert inside.state is FiberState.ACTIVE
        assert outside.state is FiberState.PENDING
        assert log == ["shared"]
        other = ctx.plugin(provider("thing", "root"))
        await ctx.settle()
        assert other.state is FiberState.ACTIVE
        assert outside.state is FiberState.ACTIVE


async def test_dependency_injector_override_substitutes_a_service() -> None:
    async with Context() as ctx:
        fake = Registry(ctx)
        await ctx.plugin(Registry)
        container = ctx.container_for("registry")
        real = ctx.registry
        with container.registry.override(providers.Object("stub")):
            assert ctx.registry == "stub"
        assert ctx.registry is real
        container.registry.override(providers.Object(fake))
        assert ctx.registry is fake
        container.registry.reset_override()


async def test_realm_container_holds_one_provider_per_service() -> None:
    async with Context() as ctx:
        source = ctx.plugin(provider("thing", 5))
        await source
        assert ctx.container_for("thing").thing() == 5
        await source.dispose()
        assert "thing" not in ctx.container_for("thing").providers


async def test_duplicate_in_a_shared_labelled_realm_is_refused_but_not_across_realms() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("thing", 1, "root-provider"))
        await ctx.plugin(provider("thing", 2, "grp-provider"), isolate={"thing": "grp"})
        again = ctx.plugin(provider("thing", 3, "again"), isolate={"thing": "grp"})
        with pytest.raises(ServiceError, match='"thing" has been registered at grp-provider'):
            await again
        assert ctx.thing == 1


async def test_provider_reads_its_own_service_while_loading() -> None:
    seen: list[Any] = []

    async def source(ctx: Context, config: object) -> None:
        ctx.provide("thing", "mine")
        seen.append(ctx.thing)

    def onlooker(ctx: Context, config: object) -> None:
        seen.append(ctx.get("thing"))

    async with Context() as ctx:
        gate = anyio.Event()

        async def slow_source(ctx: Context, config: object) -> None:
            await source(ctx, config)
            await gate.wait()

        fiber = ctx.plugin(slow_source)
        with anyio.fail_after(1):
            while not seen:
                await anyio.lowlevel.checkpoint()
        await ctx.plugin(onlooker)
        gate.set()
        await fiber
        await ctx.plugin(onlooker)
    assert seen == ["mine", None, "mine"]


async def test_reading_after_the_reader_is_disposed_is_an_inactive_error() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("thing", 1))
        reader = ctx.plugin(consumer("thing"))
        await reader
        await reader.dispose()
        with pytest.raises(ServiceError, match="in inactive context"):
            reader.ctx.thing  # noqa: B018


async def test_child_provider_of_a_dependent_does_not_deadlock_its_unload() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("base", 1))
        dependent = ctx.plugin(consumer("base", "inner"))
        await dependent
        inner = dependent.ctx.plugin(provider("inner", 2))
        await ctx.settle()
        assert dependent.state is FiberState.ACTIVE
        with anyio.fail_after(1):
            await dependent.dispose()
        assert inner.state is FiberState.DISPOSED


async def test_a_container_built_late_holds_the_services_and_follows_later_ones() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("early", 1))
        container = ctx.container_for("early")
        later = ctx.plugin(provider("late", 2))
        await later
        assert (container.early(), container.late()) == (1, 2)
        with container.late.override(providers.Object(3)):
            assert ctx.get("late") == 3
        await later.dispose()
        assert "late" not in container.providers
        assert ctx.get("early") == 1


def test_providing_and_reading_services_never_imports_dependency_injector() -> None:
    # A command that never asks for a container does not pay for the library's imports
    # (docs/performance.md, "Start-up (P11)").
    import subprocess
    import sys

    code = (
        "import sys, anyio\n"
        "from framework import Context\n"
        "async def main():\n"
        "    async with Context() as ctx:\n"
        "        def apply(c, _):\n"
        "            c.provide('thing', 5)\n"
        "        await ctx.plugin(apply)\n"
        "        assert ctx.thing == 5 and ctx.get('thing') == 5\n"
        "anyio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.startswith('dependency_injector')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
