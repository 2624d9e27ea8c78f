"""dsh-agent: the `agents` service and the agent loop (docs/agent-loop.md).

An agent drives one live session: its inbox (`followup`, `steer`, `inject`), a driver that runs
turns in the service's task group, steps that stream the model's response into the log and run
its tool calls, and a scoped context (`agent.ctx`) whose `agent/*` and `tools/*` listeners see
only that agent. Hooks: `agent/pre-step` (waterfall → `Enter | Reject`), `agent/request`
(waterfall → call config), `agent/request-error` (serial → `Retry | None`),
`agent/turn-stopping` (serial). Live events: `agent/created|disposed|status|session-start|error`,
`agent/inbox/inserted|claimed|discarded`. `ctx.agents.run(prompt)` runs one turn and returns a
`RunResult`; `ctx.agents.stream(prompt)` yields the turn as typed items (docs/python-api.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from framework import Context

from .agent import Agent, AgentStatus
from .errors import AgentError
from .hooks import (
    DISPOSED,
    PARENT,
    USER,
    AgentErrorEvent,
    AgentRequest,
    CancelCause,
    Enter,
    InboxChange,
    PreStep,
    Reject,
    RequestFailed,
    Retry,
    SessionStart,
    TurnStopping,
)
from .inbox import Inbox
from .options import AgentOptions, Config
from .results import (
    ReasoningDelta,
    RunResult,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolResult,
    ToolRun,
    TurnEnd,
    TurnStart,
    Usage,
)
from .run import RunOptions
from .service import AgentHandle, AgentsService, TaskHost

__all__ = [
    "DISPOSED",
    "PARENT",
    "USER",
    "Agent",
    "AgentError",
    "AgentErrorEvent",
    "AgentHandle",
    "AgentOptions",
    "AgentRequest",
    "AgentStatus",
    "AgentsService",
    "CancelCause",
    "Config",
    "Enter",
    "Inbox",
    "InboxChange",
    "PreStep",
    "ReasoningDelta",
    "Reject",
    "RequestFailed",
    "Retry",
    "RunOptions",
    "RunResult",
    "SessionStart",
    "StreamItem",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "ToolRun",
    "TurnEnd",
    "TurnStart",
    "TurnStopping",
    "Usage",
    "aliases",
    "apply",
    "inject",
    "name",
]

name = "agent"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-agent", "@deepseek-ai/dsh-agent-loop"]
inject = ["sessions", "llm", "tools"]


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Start the drivers' task group and provide `agents`; the disposer disposes every agent."""
    host = TaskHost()
    await ctx.start(host.run)
    service = AgentsService(ctx, config, host)
    ctx.provide(AgentsService.provide, service)
    return service.aclose
