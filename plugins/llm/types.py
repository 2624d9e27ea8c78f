"""Request options, model metadata and the JSON shapes of usage and failures (docs/models.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    from framework.signal import AbortSignal

JsonObject = dict[str, Any]
"""A JSON object in the persisted camelCase form (messages, blocks, chunks)."""

StreamChunk = dict[str, Any]
"""One stream chunk, persisted verbatim as `assistant/chunk.chunk` (see `plugins.llm.chunks`)."""

FinishReason = dict[str, Any]
"""`{"kind": "stop"|"tool-calls"|"max-tokens"}` or `{"kind": "aborted"|"error", "failure": F}`."""

FinishKind = Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]
BlockType = Literal["text", "reasoning", "tool-call", "image"]


class TokenUsage(TypedDict):
    """Token counts of one response; `inputTokens` excludes cached input."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: NotRequired[int]
    cacheWriteTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]


class LlmFailure(TypedDict):
    """A persisted request failure (finish reasons, `turn/end`, `llm/retry`)."""

    message: str
    code: str
    status: NotRequired[int]
    providerRetryAfterMs: NotRequired[int]
    requestId: NotRequired[str]


class ProviderInfo(TypedDict):
    """Display metadata of one provider route."""

    id: str
    name: str


class ToolSchema(TypedDict):
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class GenerateOptions:
    """One model request. `messages` are persisted-form message dicts; `signal` aborts it."""

    provider: str
    model: str
    messages: Sequence[Mapping[str, Any]]
    system: str | None = None
    tools: Sequence[ToolSchema] | None = None
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: Sequence[str] | None = None
    signal: AbortSignal | None = None
    session_id: str | None = None
    purpose: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class ModelInfo:
    """What an adapter knows about one model of a provider."""

    context_window: int | None = None
    default_max_tokens: int | None = None
    default_reasoning_effort: str | None = None
