"""Typed event declarations at run time: result checks, and the unknown-event warning."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

import anyio
import pytest

from framework import (
    Bail,
    Context,
    Emit,
    ListenerResultError,
    Serial,
    Waterfall,
)
from framework.hooks import declared

pytestmark = pytest.mark.anyio

UNDECLARED = "a listener was registered for event"


def fresh(prefix: str) -> str:
    """An event name no test has used (the warning is once per name per process)."""
    return f"{prefix}/{uuid.uuid4().hex[:8]}"


def warnings_about(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and UNDECLARED in r.getMessage() and name in r.getMessage()
    ]


# -- result checks ---------------------------------------------------------------------------


async def test_a_waterfall_result_is_checked_at_every_listener() -> None:
    event: Waterfall[int, str] = Waterfall(
        fresh("test/sync"), returns=str, error="test/sync must return a str, got {got}"
    )
    async with Context() as ctx:
        ctx.on(event, lambda n, next: next())  # outer: passes the inner listener's value on

        def wrong(n: int, next: Callable[[], str]) -> str:
            return n  # type: ignore[return-value]  # the deliberate mistake under test

        ctx.on(event, wrong)
        with pytest.raises(ListenerResultError) as caught:
            ctx.waterfall(event, 3, inner=lambda: "inner")
    assert str(caught.value) == "test/sync must return a str, got int"
    assert isinstance(caught.value, TypeError)
    assert caught.value.code == "INVALID_LISTENER_RESULT"


async def test_an_awaiting_waterfall_checks_the_awaited_value() -> None:
    event: Waterfall[int, Awaitable[str]] = Waterfall(fresh("test/async"), returns=str, awaits=True)
    async with Context() as ctx:

        async def inner() -> str:
            return "inner"

        async def good(n: int, next: Callable[[], Awaitable[str]]) -> str:
            return f"{n}:{await next()}"

        ctx.on(event, good)
        assert await ctx.waterfall(event, 1, inner=inner) == "1:inner"

        async def bad(n: int, next: Callable[[], Awaitable[str]]) -> str:
            return None  # type: ignore[return-value]  # the deliberate mistake under test

        ctx.on(event, bad, prepend=True)
        with pytest.raises(ListenerResultError) as caught:
            await ctx.waterfall(event, 1, inner=inner)
    assert str(caught.value) == f"{event.name} listener must return str, got NoneType"


async def test_the_inner_default_and_a_dispatch_without_listeners_are_not_checked() -> None:
    event: Waterfall[int, str] = Waterfall(fresh("test/inner"), returns=str)
    async with Context() as ctx:
        assert ctx.waterfall(event, 1, inner=lambda: 42) == 42  # type: ignore[arg-type,return-value,comparison-overlap]


async def test_serial_and_bail_check_the_winning_result() -> None:
    serial: Serial[int, str] = Serial(fresh("test/serial"), returns=str)
    bail: Bail[int, str] = Bail(fresh("test/bail"), returns=str)
    async with Context() as ctx:
        ctx.on(serial, lambda n: None)  # None and False do not win, so they are not checked
        ctx.on(serial, lambda n: False)  # type: ignore[arg-type,return-value]
        ctx.on(serial, lambda n: n)  # type: ignore[arg-type,return-value]
        ctx.on(bail, lambda n: "ok")
        with pytest.raises(ListenerResultError, match="got int"):
            await ctx.serial(serial, 5)
        assert ctx.bail(bail, 5) == "ok"


async def test_the_string_api_dispatches_the_same_listeners_unchecked() -> None:
    event: Waterfall[int, str] = Waterfall(fresh("test/strings"), returns=str)
    async with Context() as ctx:
        ctx.on(event.name, lambda n, next: n * 2)
        assert ctx.waterfall(event.name, 4, inner=lambda: "x") == 8
        with pytest.raises(ListenerResultError):
            ctx.waterfall(event, 4, inner=lambda: "x")


# -- the unknown-event warning ---------------------------------------------------------------


async def test_a_listener_for_an_undeclared_name_warns_once_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = fresh("tools/exeucte")
    caplog.set_level(logging.WARNING, "framework.events")
    async with Context() as ctx:
        ctx.on(name, lambda: None)
        ctx.on(name, lambda: None)
    async with Context() as ctx:
        ctx.on(name, lambda: None)
    [message] = warnings_about(caplog, name)
    assert f'"{name}"' in message
    assert "no plugin declares" in message


async def test_declared_names_and_declaration_objects_do_not_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event: Emit[int] = Emit(fresh("test/declared"))
    caplog.set_level(logging.WARNING, "framework.events")
    async with Context() as ctx:
        ctx.on(event, lambda n: None)
        ctx.on(event.name, lambda n: None)  # a third party using the plain name
    assert not warnings_about(caplog, event.name)
    assert declared(event.name) is event


async def test_the_check_waits_until_no_plugin_is_loading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listener registered while another plugin is still loading is checked once the root is
    idle: that plugin may declare the event late (here: by importing its hooks in `apply`)."""
    late, never = fresh("late/declared"), fresh("never/declared")
    caplog.set_level(logging.WARNING, "framework.events")
    seen_during_load: list[str] = []

    def listener_plugin(ctx: Context, config: object) -> None:
        ctx.on(late, lambda: None)
        ctx.on(never, lambda: None)

    async def declaring_plugin(ctx: Context, config: object) -> None:
        await anyio.sleep(0.01)
        seen_during_load.extend(warnings_about(caplog, late) + warnings_about(caplog, never))
        Emit(late)

    async with Context() as ctx:
        ctx.plugin(listener_plugin)
        ctx.plugin(declaring_plugin)
        await ctx.settle()
        assert seen_during_load == []
        assert not warnings_about(caplog, late)
        assert len(warnings_about(caplog, never)) == 1
