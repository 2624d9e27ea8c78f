"""Request building: call config, `request/header` and `request/context` events.

The first request an agent object makes seeds its call config from `AgentOptions` (plus a
persisted `reasoningEffort` of the same route); later requests start from the last header minus
the values the adapter filled in. The `agent/request` waterfall may change the config. A header is
appended on the agent's first request (`initial`, or `resume` when the log already has one) and
whenever it differs from the last one (`change`); `request/context` whenever it changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from plugins.llm import (
    GenerateOptions,
    LlmError,
    LlmService,
    PreparedCall,
    RetryPolicy,
    StreamChunk,
    ToolSchema,
)
from plugins.session.messages import message_of

from .errors import AgentError
from .hooks import REQUEST, AgentRequest

if TYPE_CHECKING:
    from framework import AbortSignal
    from plugins.session import Session

    from .agent import Agent

NO_ADAPTER = "NO_ADAPTER"


@dataclass(frozen=True)
class Request:
    """One prepared model request of a step."""

    options: GenerateOptions
    retry_policy: RetryPolicy | None
    stream: Callable[[], AsyncIterable[StreamChunk]]


class Transcript:
    """A session's request messages, kept between requests (P6: O(new events) per request).

    The messages are those of the surface nodes, in order (`Session.messages()`). The nodes of
    the last request are kept; while the surface still starts with them (a replace anywhere
    starts over), only the nodes appended since are read from the log. The log is append-only,
    so a kept node's message is still the one at its seq.
    """

    __slots__ = ("_messages", "_nodes")

    def __init__(self) -> None:
        self._nodes: list[int] = []
        self._messages: list[dict[str, Any]] = []

    def messages(self, session: Session) -> list[dict[str, Any]]:
        """A new list of the session's model-visible messages (the messages are not copied)."""
        nodes = session.surface.nodes
        kept = len(self._nodes)
        if kept > len(nodes) or nodes[:kept] != self._nodes:
            kept = 0
            self._messages = []
        events = session.events
        self._messages += [message_of(events[seq]) for seq in nodes[kept:]]
        self._nodes = nodes[:]
        return self._messages[:]


class RequestState:
    """What the loop remembers between requests: the last header and context in the log, and
    the transcript."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        #: True until this agent object's first request (whose header is always written).
        self.first = True
        self.header: dict[str, Any] | None = None
        self.context: dict[str, Any] | None = None
        self.transcript = Transcript()
        for event in reversed(events):
            if self.header is None and event["type"] == "request/header":
                self.header = event["data"]["header"]
            elif self.context is None and event["type"] == "request/context":
                self.context = event["data"]
            if self.header is not None and self.context is not None:
                break

    def seed_config(self, agent: Agent) -> dict[str, Any]:
        """The call config before the `agent/request` waterfall."""
        if not self.first and self.header is not None:
            defaults = self.header.get("adapterDefaults") or {}
            return {k: v for k, v in self.header["config"].items() if not defaults.get(k)}
        options = agent.options
        config: dict[str, Any] = {}
        if options.provider is not None:
            config["provider"] = options.provider
        if options.model is not None:
            config["model"] = options.model
        if options.max_tokens is not None:
            config["maxTokens"] = options.max_tokens
        if self.header is None:
            return config
        previous = self.header["config"]
        if (
            previous.get("provider") == config.get("provider")
            and previous.get("model") == config.get("model")
            and "reasoningEffort" in previous
            and not self.header.get("adapterDefaults", {}).get("reasoningEffort")
        ):
            config["reasoningEffort"] = previous["reasoningEffort"]
        return config


async def build_request(agent: Agent, turn: int, step: int, signal: AbortSignal) -> Request:
    """Resolve the route, append header/context events as needed and build the request."""
    state = agent.request_state
    payload = AgentRequest(agent, turn, step, state.seed_config(agent))

    async def inner() -> dict[str, Any]:
        return payload.config

    config = await agent.ctx.waterfall(REQUEST, payload, inner=inner)
    provider, model = config.get("provider"), config.get("model")
    if not (isinstance(provider, str) and provider and isinstance(model, str) and model):
        raise AgentError(
            f'agent "{agent.id}" has no provider/model: set AgentOptions.provider and '
            "AgentOptions.model or supply both via the agent/request waterfall",
            "NO_ROUTE",
        )
    llm: LlmService = agent.ctx.service("llm")  # dispatches llm/stream in the agent's scope
    prepared: PreparedCall | None = None
    try:
        prepared = await llm.prepare_call(config, signal)
    except LlmError as error:
        if error.code != NO_ADAPTER:
            raise
    context: dict[str, Any] = {"provider": provider, "model": model}
    header: dict[str, Any] = {"config": config}
    if prepared is not None:
        header["config"] = config = dict(prepared.config)
        if prepared.adapter_defaults:
            header["adapterDefaults"] = dict(prepared.adapter_defaults)
        if prepared.context is not None:
            context = dict(prepared.context)
    if agent.options.system is not None:
        header["system"] = agent.options.system
    tools = agent.service.tools.schemas(agent)
    header["tools"] = tools

    session = agent.session
    if state.first:
        reason: str | None = "initial" if state.header is None else "resume"
    else:
        reason = "change" if header != state.header else None
    state.first = False
    if reason is not None:
        event = session.append("request/header", {"header": header, "reason": reason})
        state.header = event["data"]["header"]
    if context != state.context:
        state.context = session.append("request/context", context)["data"]

    options = GenerateOptions(
        provider=config["provider"],
        model=config["model"],
        messages=state.transcript.messages(session),
        system=agent.options.system,
        tools=cast("list[ToolSchema]", tools) or None,
        reasoning_effort=config.get("reasoningEffort"),
        temperature=config.get("temperature"),
        max_tokens=config.get("maxTokens"),
        stop=config.get("stop"),
        signal=signal,
        session_id=agent.id,
        idempotency_key=f"{agent.id}:{turn}:{step}",
    )
    if prepared is None:  # the stream reports the missing adapter as its finish chunk
        return Request(options, None, lambda: llm.stream(options))
    return Request(options, prepared.retry_policy, lambda: prepared.stream(options))
