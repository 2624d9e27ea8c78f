"""Scoped events: scoped listeners see their scope and descendants; unscoped ones see all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from framework import Context, Scope

pytestmark = pytest.mark.anyio


async def test_scoped_listeners_see_only_their_scope_and_descendants() -> None:
    heard: list[tuple[str, str]] = []
    agent_x, agent_y = Scope(), Scope()
    async with Context() as ctx:
        x_ctx, y_ctx = ctx.scoped(agent_x), ctx.scoped(agent_y)
        child_ctx = ctx.scoped(Scope(agent_x))
        ctx.on("agent/pre-step", lambda who: heard.append(("global", who)))
        x_ctx.on("agent/pre-step", lambda who: heard.append(("x", who)))
        y_ctx.on("agent/pre-step", lambda who: heard.append(("y", who)))
        x_ctx.emit("agent/pre-step", "X")
        child_ctx.emit("agent/pre-step", "X-child")
        y_ctx.emit("agent/pre-step", "Y")
        ctx.emit("agent/pre-step", "none")
    assert heard == [
        ("global", "X"),
        ("x", "X"),
        ("global", "X-child"),
        ("x", "X-child"),
        ("global", "Y"),
        ("y", "Y"),
        ("global", "none"),
    ]


async def test_every_dispatch_mode_uses_the_calling_contexts_scope() -> None:
    scope = Scope()
    async with Context() as ctx:
        scoped = ctx.scoped(scope)
        scoped.on("q", lambda *args: "scoped")
        assert ctx.bail("q") is None
        assert scoped.bail("q") == "scoped"
        assert await ctx.serial("q") is None
        assert await scoped.serial("q") == "scoped"

        def outer(nxt: Callable[[], Any]) -> Any:
            return ("outer", nxt())

        ctx.on("w", outer)
        scoped.on("w", lambda nxt: ("scoped", nxt()))
        assert ctx.waterfall("w", inner=lambda: "core") == ("outer", "core")
        assert scoped.waterfall("w", inner=lambda: "core") == ("outer", ("scoped", "core"))
        seen: list[str] = []
        scoped.on("p", lambda: seen.append("scoped"))
        await ctx.parallel("p")
        await scoped.parallel("p")
        assert seen == ["scoped"]


async def test_scoped_context_belongs_to_the_callers_fiber() -> None:
    scope = Scope()
    holder: list[Context] = []

    def agent(ctx: Context, config: object) -> None:
        scoped = ctx.scoped(scope)
        holder.append(scoped)
        scoped.on("e", lambda: "agent")

    async with Context() as ctx:
        fiber = ctx.plugin(agent)
        await fiber
        assert holder[0].fiber is fiber
        assert holder[0].scope is scope
        assert holder[0].scoped(scope).bail("e") == "agent"
        await fiber.dispose()
        assert ctx.scoped(scope).bail("e") is None


async def test_plugins_registered_through_a_scoped_context_inherit_its_scope() -> None:
    scope = Scope()
    async with Context() as ctx:
        fiber = ctx.scoped(scope).plugin(lambda ctx, config: ctx.on("e", lambda: "child"))
        await fiber
        assert fiber.ctx.scope is scope
        assert ctx.bail("e") is None
        assert ctx.scoped(scope).bail("e") == "child"


async def test_listeners_snapshot_follows_the_calling_scope() -> None:
    scope = Scope()

    def plain() -> None:
        pass

    def scoped_listener() -> None:
        pass

    async with Context() as ctx:
        ctx.on("e", plain)
        ctx.scoped(scope).on("e", scoped_listener, prepend=True)
        assert ctx.listeners("e") == (plain,)
        assert ctx.scoped(scope).listeners("e") == (scoped_listener, plain)
        assert ctx.listeners("missing") == ()


async def test_scoped_snapshots_follow_registration_changes() -> None:
    scope = Scope()
    async with Context() as ctx:
        scoped = ctx.scoped(scope)
        off = scoped.on("e", lambda: "first")
        assert scoped.bail("e") == "first"
        scoped.on("e", lambda: "prepended", prepend=True)
        assert scoped.bail("e") == "prepended"
        off()
        assert scoped.listeners("e")[0]() == "prepended"
        assert len(scoped.listeners("e")) == 1
        many = [Scope(scope) for _ in range(100)]
        assert all(ctx.scoped(s).bail("e") == "prepended" for s in many)
        assert ctx.bail("e") is None


async def test_listener_snapshots_return_what_listeners_returns_at_each_call() -> None:
    scope = Scope()

    def plain() -> None:
        pass

    def scoped_listener() -> None:
        pass

    async with Context() as ctx:
        unscoped = ctx.listener_snapshots("e")  # made before any listener of "e" exists
        in_scope = ctx.scoped(scope).listener_snapshots("e")
        assert unscoped() == in_scope() == ()
        off = ctx.on("e", plain)
        assert unscoped() == in_scope() == (plain,)
        ctx.scoped(scope).on("e", scoped_listener, prepend=True)
        assert unscoped() == ctx.listeners("e") == (plain,)
        assert in_scope() == ctx.scoped(scope).listeners("e") == (scoped_listener, plain)
        off()
        assert unscoped() == ()
        assert in_scope() == (scoped_listener,)
