"""`ctx.<service>` through the class attribute installed per service name (when a root provides
or injects it, or a `Service` subclass declares it): the rules and errors of the former
`Context.__getattr__`, unchanged (docs/performance.md, "Eighth round: reading a service").
Each test uses its own names: the attributes are installed once per process."""

from __future__ import annotations

from typing import Any

import pytest

from framework import Context, Service, ServiceError

pytestmark = pytest.mark.anyio


def provider(name: str, value: object) -> Any:
    def apply(ctx: Context, config: object) -> None:
        ctx.provide(name, value)

    apply.__name__ = f"provides {name}"
    return apply


def consumer(name: str, contexts: list[Context]) -> Any:
    def apply(ctx: Context, config: object) -> None:
        contexts.append(ctx)

    apply.inject = [name]  # type: ignore[attr-defined]
    return apply


def errors(read: Any) -> tuple[type[BaseException], str]:
    try:
        read()
    except Exception as error:
        return type(error), str(error)
    raise AssertionError("the read succeeded")


async def test_a_class_attribute_read_keeps_every_rule_and_error() -> None:
    readers: list[Context] = []
    nosy: list[Context] = []
    async with Context() as ctx:
        source = ctx.plugin(provider("attrRules", 1))
        reader = ctx.plugin(consumer("attrRules", readers))
        await ctx.plugin(lambda c, config: nosy.append(c))
        await ctx.settle()
        assert "attrRules" in vars(Context)  # reads go through the class attribute
        assert readers[0].attrRules == 1
        assert ctx.attrRules == 1
        assert errors(lambda: nosy[0].attrRules) == (
            ServiceError,
            'cannot get property "attrRules" without inject',
        )
        await source.dispose()
        assert errors(lambda: readers[0].attrRules) == (
            ServiceError,
            'cannot get required service "attrRules" in inactive context',
        )
        assert errors(lambda: ctx.attrRules) == (
            AttributeError,
            'service "attrRules" is not provided',
        )
        await ctx.plugin(provider("attrRules", 2))
        assert ctx.attrRules == 2
        await reader.dispose()
        assert errors(lambda: readers[0].attrRules) == (
            ServiceError,
            'cannot get required service "attrRules" in inactive context',
        )


async def test_a_service_of_another_root_stays_an_unknown_attribute() -> None:
    async with Context() as first:
        await first.plugin(provider("attrElsewhere", 1))
        assert first.attrElsewhere == 1
    async with Context() as second:
        with pytest.raises(AttributeError) as info:
            second.attrElsewhere  # noqa: B018
        assert str(info.value) == "'Context' object has no attribute 'attrElsewhere'"
        assert info.value.name == "attrElsewhere"
        assert info.value.obj is second
        assert not hasattr(second, "attrElsewhere")
        assert second.get("attrElsewhere") is None


async def test_setting_deleting_or_reading_a_service_on_the_class_is_refused_as_before() -> None:
    async with Context() as ctx:
        await ctx.plugin(provider("attrWrite", 1))
        assert ctx.attrWrite == 1
        with pytest.raises(AttributeError) as info:
            setattr(ctx, "attrWrite", 2)  # noqa: B010 (mypy: no such attribute)
        assert str(info.value) == "'Context' object has no attribute 'attrWrite'"
        with pytest.raises(AttributeError) as info:
            delattr(ctx, "attrWrite")
        assert str(info.value) == "'Context' object has no attribute 'attrWrite'"
        with pytest.raises(AttributeError) as info:
            getattr(Context, "attrWrite")  # noqa: B009
        assert str(info.value) == "type object 'Context' has no attribute 'attrWrite'"
        assert ctx.attrWrite == 1


async def test_a_service_class_declared_later_reads_as_a_service() -> None:
    nosy: list[Context] = []
    async with Context() as ctx:
        await ctx.plugin(lambda c, config: nosy.append(c))

        class Late(Service):
            provide = "attrLate"

        assert errors(lambda: ctx.attrLate) == (
            AttributeError,
            'service "attrLate" is not provided',
        )
        assert errors(lambda: nosy[0].attrLate) == (
            ServiceError,
            'cannot get property "attrLate" without inject',
        )
        await ctx.plugin(Late)
        assert isinstance(ctx.attrLate, Late)
