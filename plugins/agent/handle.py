"""`AgentHandle`: an open agent and the coroutine function that disposes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agent import Agent


@dataclass(frozen=True)
class AgentHandle:
    """A created agent and the coroutine function that disposes it."""

    agent: Agent
    dispose: Callable[[], Awaitable[None]]
