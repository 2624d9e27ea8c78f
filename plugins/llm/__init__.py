"""The `llm` service plugin (`dsh-llm`): adapter routes, the lazy `llm/stream` waterfall, stream
chunk types, block assembly and the per-route retry policy (docs/models.md).

Plugin name: `llm` (entry point `dsh-llm`). Other packages import the public types from here.
"""

from __future__ import annotations

from framework import Context
from plugins.llm import chunks
from plugins.llm.adapter import LlmAdapter
from plugins.llm.assembly import AssembledResponse, BlockAssembler, assemble
from plugins.llm.errors import HarnessError, LlmError, make_failure
from plugins.llm.hooks import STREAM
from plugins.llm.registry import AdapterHandle
from plugins.llm.retry import DEFAULT_RETRYABLE_CODES, RetryPolicy
from plugins.llm.service import LlmService, PreparedCall, close_stream, failure_chunk
from plugins.llm.types import (
    BlockType,
    FinishKind,
    FinishReason,
    GenerateOptions,
    JsonObject,
    LlmFailure,
    ModelInfo,
    ProviderInfo,
    StreamChunk,
    TokenUsage,
    ToolSchema,
)

__all__ = [
    "DEFAULT_RETRYABLE_CODES",
    "STREAM",
    "AdapterHandle",
    "AssembledResponse",
    "BlockAssembler",
    "BlockType",
    "FinishKind",
    "FinishReason",
    "GenerateOptions",
    "HarnessError",
    "JsonObject",
    "LlmAdapter",
    "LlmError",
    "LlmFailure",
    "LlmService",
    "ModelInfo",
    "PreparedCall",
    "ProviderInfo",
    "RetryPolicy",
    "StreamChunk",
    "TokenUsage",
    "ToolSchema",
    "aliases",
    "apply",
    "assemble",
    "chunks",
    "close_stream",
    "failure_chunk",
    "make_failure",
    "name",
]

name = "llm"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-llm"]


def apply(ctx: Context, config: object) -> None:
    """Provide the `llm` service."""
    ctx.provide(LlmService.provide, LlmService(ctx))
