"""Per-agent model options and the plugin's configuration (docs/agent-loop.md)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True)
class AgentOptions:
    """Which route an agent talks to and how: seeds the first request's call config.

    `system` is the system prompt sent with every request (port: there is no system-prompt
    service); `max_tokens` becomes the call config's `maxTokens`.
    """

    provider: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    system: str | None = None


class AgentDefaults(BaseModel):
    """Default `AgentOptions` for sessions an app creates (`dsh run`, acceptance manifests)."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = None
    model: str | None = None
    system: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)

    def options(self) -> AgentOptions:
        """These defaults as an `AgentOptions`."""
        return AgentOptions(self.provider, self.model, self.max_tokens, self.system)


class Config(AgentDefaults):
    """`dsh-agent` configuration.

    `max_parallel_tool_calls` bounds the rolling pool of concurrency-safe tool calls of one
    response; `flush_on_idle` makes the driver checkpoint the session after its last `turn/end`,
    so `when_idle()` implies a durable turn end; `agents` holds named option presets that
    override the defaults field by field (`agents.options(preset)`).
    """

    max_parallel_tool_calls: int = Field(default=10, ge=1)
    flush_on_idle: bool = True
    agents: dict[str, AgentDefaults] = Field(default_factory=dict)
