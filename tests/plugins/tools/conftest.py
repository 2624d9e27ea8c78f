"""Helpers for the tools tests: a root context with `dsh-tools`, stand-in agents, calls."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import plugins.tools as tools_plugin
from framework import AbortController, AbortSignal, Context, Scope
from plugins.tools import Tool, ToolExecution, ToolExecutionInput


@dataclass
class StandInAgent:
    """What the tools runtime reads from an agent: a scoped context and a session."""

    ctx: Any
    session: Any = None


@asynccontextmanager
async def _tools_root() -> AsyncIterator[Context]:
    async with Context() as root:
        await root.plugin(tools_plugin)
        yield root


def _agent_of(ctx: Any, parent: Scope | None = None) -> StandInAgent:
    return StandInAgent(ctx.scoped(Scope(parent)))


def _call(
    name: str,
    arguments: Any = None,
    *,
    agent: StandInAgent | None = None,
    signal: AbortSignal | None = None,
    call_id: str = "call-1",
    **extra: Any,
) -> ToolExecutionInput:
    return ToolExecutionInput(
        call_id,
        name,
        {} if arguments is None else arguments,
        AbortController().signal if signal is None else signal,
        agent=agent,
        **extra,
    )


def _tool(
    name: str = "echo",
    body: Callable[[Any, ToolExecution], Any] | None = None,
    **fields: Any,
) -> Tool:
    async def echo(args: Any, exec: ToolExecution) -> Any:
        return args

    return Tool(
        name=name,
        description=f"the {name} tool",
        parameters=fields.pop("parameters", {"type": "object"}),
        execute=body if body is not None else echo,
        **fields,
    )


@pytest.fixture
def tools_root() -> Callable[[], Any]:
    """`async with tools_root() as root:` — a root Context with the tools service."""
    return _tools_root


@pytest.fixture
def agent_of() -> Callable[..., StandInAgent]:
    """`agent_of(ctx)` — a stand-in agent on a fresh scope of `ctx`'s fiber."""
    return _agent_of


@pytest.fixture
def call() -> Callable[..., ToolExecutionInput]:
    """`call(name, args, agent=..., signal=...)` — a ToolExecutionInput."""
    return _call


@pytest.fixture
def make_tool() -> Callable[..., Tool]:
    """`make_tool(name, body, **fields)` — a Tool (default body echoes its arguments)."""
    return _tool
