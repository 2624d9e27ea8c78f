"""Tool and guard layers: one global layer plus one per event scope (an agent's `agent.ctx`).

Lookups start at a scope and walk outwards to the global layer: the nearest layer wins. Guards
run global first, then outer scopes before inner ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from framework import Context, Scope

from .definition import Tool

if TYPE_CHECKING:
    from .execution import ToolExecution

#: `guard(exec)` returns a denial reason (a string) or None; it may be async.
Guard = Callable[["ToolExecution"], "str | Awaitable[str | None] | None"]


class Layer:
    """The tools and guards registered for one scope (or globally)."""

    __slots__ = ("guards", "tools")

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.guards: list[Guard] = []

    def empty(self) -> bool:
        return not self.tools and not self.guards


class Registry:
    """Layers by scope; `None` is the global layer."""

    def __init__(self) -> None:
        self._global = Layer()
        self._scoped: dict[Scope, Layer] = {}

    def layer(self, scope: Scope | None) -> Layer:
        """The layer of `scope`, created on first use."""
        if scope is None:
            return self._global
        layer = self._scoped.get(scope)
        if layer is None:
            layer = self._scoped[scope] = Layer()
        return layer

    def holds(self, name: str, scope: Scope | None) -> bool:
        """Whether `scope`'s own layer (not an outer one) has a tool called `name`."""
        layer = self._global if scope is None else self._scoped.get(scope)
        return layer is not None and name in layer.tools

    def release(self, scope: Scope | None) -> None:
        """Forget `scope`'s layer once it holds nothing (its owner unwound)."""
        if scope is not None and scope in self._scoped and self._scoped[scope].empty():
            del self._scoped[scope]

    def chain(self, scope: Scope | None) -> list[Layer]:
        """The layers visible from `scope`, outermost (global) first."""
        layers: list[Layer] = []
        while scope is not None:
            layer = self._scoped.get(scope)
            if layer is not None:
                layers.append(layer)
            scope = scope.parent
        layers.append(self._global)
        layers.reverse()
        return layers

    def resolve(self, name: str, scope: Scope | None) -> Tool | None:
        """The nearest layer's tool called `name`."""
        for layer in reversed(self.chain(scope)):
            tool = layer.tools.get(name)
            if tool is not None:
                return tool
        return None

    def visible(self, scope: Scope | None) -> list[Tool]:
        """Every tool visible from `scope`: shadowed names keep their outer position."""
        merged: dict[str, Tool] = {}
        for layer in self.chain(scope):
            merged.update(layer.tools)
        return list(merged.values())

    def guards(self, scope: Scope | None) -> list[Guard]:
        """Guards visible from `scope`, global first."""
        return [guard for layer in self.chain(scope) for guard in layer.guards]


def scope_of(ctx: Context) -> Scope | None:
    """The event scope a context dispatches and registers in (None for plain contexts)."""
    return ctx.scope
