"""Typed service access: `ctx.service(Key)` / `ctx.get(Key)`, and no app names in the framework."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from dependency_injector import providers

from framework import Context, Service, ServiceError, ServiceKey

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


class Counter(Service):
    provide = "counterKeys"

    def __init__(self, ctx: Context, config: object = None) -> None:
        super().__init__(ctx, config)
        self.seen: list[str] = []

    def add(self, item: str) -> None:
        def setup() -> Callable[[], None]:
            self.seen.append(item)
            return lambda: self.seen.remove(item)

        self.caller.effect(setup)


LABEL: ServiceKey[str] = ServiceKey("labelKeys")


async def test_a_service_class_is_a_key_with_the_rules_of_attribute_access() -> None:
    reads: list[object] = []

    def consumer(ctx: Context, config: object) -> None:
        ctx.service(Counter).add(
            "from consumer"
        )  # owner tracing: the view is bound to this context
        reads.append(ctx.service(LABEL))

    consumer.inject = ["counterKeys", "labelKeys"]  # type: ignore[attr-defined]

    async with Context() as ctx:
        await ctx.plugin(Counter)
        ctx.provide("labelKeys", "hello")
        fiber = ctx.plugin(consumer)
        await fiber
        assert ctx.service(Counter).seen == ["from consumer"]
        assert reads == ["hello"]
        await fiber.dispose()
        assert ctx.service(Counter).seen == []


async def test_reading_a_key_without_inject_is_the_attribute_error() -> None:
    failures: list[str] = []

    def nosy(ctx: Context, config: object) -> None:
        for read in (lambda: ctx.service(Counter), lambda: ctx.counterKeys):
            try:
                read()
            except ServiceError as error:
                failures.append(str(error))
        assert ctx.get(Counter) is not None  # optional reads need no injection

    async with Context() as ctx:
        await ctx.plugin(Counter)
        await ctx.plugin(nosy)
    assert failures == ['cannot get property "counterKeys" without inject'] * 2


async def test_get_returns_none_for_a_missing_service_and_honours_overrides() -> None:
    async with Context() as ctx:
        assert ctx.get(Counter) is None
        assert ctx.get(LABEL) is None
        ctx.provide("labelKeys", "real")
        ctx.container_for("labelKeys").labelKeys.override(providers.Object("fake"))
        assert ctx.get(LABEL) == "fake"
        assert ctx.service(LABEL) == "fake"


async def test_a_class_that_is_not_a_service_is_refused() -> None:
    async with Context() as ctx:
        with pytest.raises(TypeError, match="is not a service key"):
            ctx.service(int)


def test_the_framework_knows_no_service_names_of_this_app() -> None:
    """Without the app's plugins imported, a root reads `sessions` as an unknown attribute."""
    code = (
        "import anyio\n"
        "from framework import Context\n"
        "from framework.service import class_service_names\n"
        "assert not class_service_names, class_service_names\n"
        "async def main():\n"
        "    async with Context() as ctx:\n"
        "        try:\n"
        "            ctx.sessions\n"
        "        except AttributeError as error:\n"
        "            print(type(error).__name__, error)\n"
        "anyio.run(main)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "AttributeError 'Context' object has no attribute 'sessions'\n"
