"""dsh-agent: the `agents` service and the agent loop (docs/agent-loop.md).

An agent drives one live session: its inbox (`followup`, `steer`, `inject`), a driver that runs
turns in the service's task group, steps that stream the model's response into the log and run
its tool calls, and a scoped context (`agent.ctx`) whose `agent/*` and `tools/*` listeners see
only that agent. Hooks: `agent/pre-step` (waterfall → `Enter | Reject`), `agent/request`
(waterfall → call config), `agent/request-error` (serial → `Retry | None`),
`agent/turn-stopping` (serial). Live events: `agent/created|disposed|status|session-start|error`,
`agent/inbox/inserted|claimed|discarded`. `ctx.agents.run(prompt)` runs one turn and returns a
`RunResult`; `ctx.agents.stream(prompt)` yields the turn as typed items; `ctx.agents.open()`
opens a session's agent and says what opening did (docs/python-api.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context

    from .agent import Agent, AgentStatus
    from .errors import AgentError
    from .handle import AgentHandle
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
    from .opening import Opened, Repairs
    from .options import AgentOptions, Config
    from .reasons import NOT_DURABLE
    from .results import (
        BlockEnd,
        MessageEnd,
        ProgressItem,
        ReasoningDelta,
        RetryScheduled,
        RunResult,
        StepStart,
        StreamItem,
        TextDelta,
        ToolCall,
        ToolCallStart,
        ToolResult,
        ToolRun,
        TurnEnd,
        TurnStart,
        Usage,
    )
    from .run import Prompt, RunOptions, StreamOptions
    from .service import AgentsService


__all__ = [
    "DISPOSED",
    "NOT_DURABLE",
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
    "BlockEnd",
    "CancelCause",
    "Config",
    "Enter",
    "Inbox",
    "InboxChange",
    "MessageEnd",
    "Opened",
    "PreStep",
    "ProgressItem",
    "Prompt",
    "ReasoningDelta",
    "Reject",
    "Repairs",
    "RequestFailed",
    "Retry",
    "RetryScheduled",
    "RunOptions",
    "RunResult",
    "SessionStart",
    "StepStart",
    "StreamItem",
    "StreamOptions",
    "TextDelta",
    "ToolCall",
    "ToolCallStart",
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
#: What `apply` provides, for the loader to read without importing the service (docs/concepts.md).
provides = ["agents"]


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Start the drivers' task group and provide `agents`; the disposer disposes every agent."""
    from .service import AgentsService, TaskHost

    host = TaskHost()
    await ctx.start(host.run)
    service = AgentsService(ctx, config, host)
    ctx.provide(AgentsService.provide, service)
    return service.aclose


#: The module of each public name. The package imports one on the first use of one of its names:
#: resolving the plugin, or importing `plugins.agent.hooks`, does not import the agent's machinery
#: (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {
    "Agent": "agent",
    "AgentStatus": "agent",
    "AgentError": "errors",
    "AgentHandle": "handle",
    "DISPOSED": "hooks",
    "PARENT": "hooks",
    "USER": "hooks",
    "AgentErrorEvent": "hooks",
    "AgentRequest": "hooks",
    "CancelCause": "hooks",
    "Enter": "hooks",
    "InboxChange": "hooks",
    "PreStep": "hooks",
    "Reject": "hooks",
    "RequestFailed": "hooks",
    "Retry": "hooks",
    "SessionStart": "hooks",
    "TurnStopping": "hooks",
    "Inbox": "inbox",
    "Opened": "opening",
    "Repairs": "opening",
    "AgentOptions": "options",
    "Config": "options",
    "NOT_DURABLE": "reasons",
    "BlockEnd": "results",
    "MessageEnd": "results",
    "ProgressItem": "results",
    "ReasoningDelta": "results",
    "RetryScheduled": "results",
    "RunResult": "results",
    "StepStart": "results",
    "StreamItem": "results",
    "TextDelta": "results",
    "ToolCall": "results",
    "ToolCallStart": "results",
    "ToolResult": "results",
    "ToolRun": "results",
    "TurnEnd": "results",
    "TurnStart": "results",
    "Usage": "results",
    "Prompt": "run",
    "RunOptions": "run",
    "StreamOptions": "run",
    "AgentsService": "service",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
