"""The `tools` service: registry front (owner-traced through the bound view's caller) and the
execution entry points (docs/tools-and-cancellation.md)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from framework import Context, Scope, Service

from .definition import Tool
from .execution import AgentLike, ToolExecutionInput
from .grace import CancelGrace
from .pipeline import ToolScheduler
from .registry import Guard, Registry, scope_of
from .results import ToolExecutionResult

ExecutionMode = Literal["exclusive", "parallel"]

#: How long an aborted call's body may keep running before it is cancelled (`cancel_grace_ms`).
DEFAULT_GRACE_MS = 2000.0


class ToolsService(Service):
    """Registry and pipeline. Read it as `ctx.tools`: registrations belong to the reading
    context's fiber (undone when it is disposed) and land in that context's scope layer, so
    `agent.ctx.tools.register(tool)` adds a per-agent variant that shadows a global tool."""

    provide: ClassVar[str] = "tools"

    def __init__(self, ctx: Context, cancel_grace_ms: float = DEFAULT_GRACE_MS) -> None:
        super().__init__(ctx)
        self._registry = Registry()
        #: The staged pipeline the agent loop drives (see `plugins.tools.pipeline`).
        self.scheduler = ToolScheduler(ctx, self._registry, CancelGrace(cancel_grace_ms))
        #: The plugin that registered each tool (see `source`).
        self._sources: weakref.WeakKeyDictionary[Tool, str] = weakref.WeakKeyDictionary()

    def register(self, tool: Tool) -> Callable[[], Any]:
        """Register `tool` in the caller's layer; returns a disposer."""
        if not isinstance(tool, Tool):
            raise TypeError(f"register() takes a Tool, got {type(tool).__name__}")
        tool.check()
        scope = scope_of(self.caller)
        if self._registry.holds(tool.name, scope):
            if scope is None:
                raise ValueError(
                    f'tool "{tool.name}" is already registered (for a per-agent variant, '
                    "register through that agent's `agent.ctx` instead)"
                )
            raise ValueError(f'tool "{tool.name}" is already registered in this scope')
        self._sources[tool] = self.caller.fiber.name

        def setup() -> Callable[[], None]:
            layer = self._registry.layer(scope)
            layer.tools[tool.name] = tool

            def dispose() -> None:
                if layer.tools.get(tool.name) is tool:
                    del layer.tools[tool.name]
                self._registry.release(scope)

            return dispose

        return self.caller.effect(setup)

    def guard(self, fn: Guard) -> Callable[[], Any]:
        """Add a guard `fn(exec) -> str | None` in the caller's layer; a string denies the call."""
        if not callable(fn):
            raise TypeError("guard() takes a callable")
        scope = scope_of(self.caller)

        def setup() -> Callable[[], None]:
            layer = self._registry.layer(scope)
            layer.guards.append(fn)

            def dispose() -> None:
                layer.guards.remove(fn)
                self._registry.release(scope)

            return dispose

        return self.caller.effect(setup)

    def get(self, name: str, agent: AgentLike | None = None) -> Tool | None:
        """The tool `name` as `agent` sees it (nearest layer wins), else None."""
        return self._registry.resolve(name, _scope(agent))

    def source(self, tool: Tool) -> str | None:
        """The name of the plugin that registered `tool` (for listings such as `dsh tools`)."""
        return self._sources.get(tool)

    def schemas(self, agent: AgentLike | None = None) -> list[dict[str, Any]]:
        """Model-facing declarations of every tool `agent` sees (nearest layer wins)."""
        return [tool.schema() for tool in self._registry.visible(_scope(agent))]

    def execution_mode(self, name: str, args: Any, agent: AgentLike | None = None) -> ExecutionMode:
        """`"parallel"` only for a resolvable tool that is concurrency-safe for `args`."""
        tool = self.get(name, agent)
        return "parallel" if tool is not None and tool.concurrency_safe(args) else "exclusive"

    async def execute(self, input: ToolExecutionInput) -> ToolExecutionResult:
        """Run one call through the whole pipeline."""
        return await self.scheduler.execute(input)

    def skip_grace(self, agent: AgentLike | None = None) -> int:
        """Cut short now every body whose caller has aborted (only `agent`'s calls, if given)
        instead of waiting for the end of its grace; returns how many were cut."""
        return self.scheduler.grace.skip(agent)


def _scope(agent: AgentLike | None) -> Scope | None:
    return None if agent is None else scope_of(agent.ctx)
