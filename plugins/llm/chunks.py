"""Constructors of stream chunks and finish reasons in persisted key order (docs/models.md)."""

from __future__ import annotations

from typing import Any

from plugins.llm.types import BlockType, FinishReason, LlmFailure, StreamChunk, TokenUsage


def block_start(index: int, block_type: BlockType) -> StreamChunk:
    """`{"type":"block-start","index","blockType"}`."""
    return {"type": "block-start", "index": index, "blockType": block_type}


def text_delta(index: int, text: str) -> StreamChunk:
    """`{"type":"text-delta","index","text"}`."""
    return {"type": "text-delta", "index": index, "text": text}


def reasoning_delta(index: int, text: str) -> StreamChunk:
    """`{"type":"reasoning-delta","index","text"}`."""
    return {"type": "reasoning-delta", "index": index, "text": text}


def tool_call_delta(
    index: int, call_id: str, arguments_delta: str, name: str | None = None
) -> StreamChunk:
    """`{"type":"tool-call-delta","index","id","name"?,"argumentsDelta"}`."""
    chunk: StreamChunk = {"type": "tool-call-delta", "index": index, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = arguments_delta
    return chunk


def block_end(index: int, block: dict[str, Any]) -> StreamChunk:
    """`{"type":"block-end","index","block"}` carrying the whole block."""
    return {"type": "block-end", "index": index, "block": block}


def usage(value: TokenUsage) -> StreamChunk:
    """`{"type":"usage","usage"}`."""
    return {"type": "usage", "usage": value}


def finish(reason: FinishReason, replay_state: Any = None) -> StreamChunk:
    """`{"type":"finish","reason","replayState"?}`."""
    chunk: StreamChunk = {"type": "finish", "reason": reason}
    if replay_state is not None:
        chunk["replayState"] = replay_state
    return chunk


def text_block(text: str) -> dict[str, Any]:
    """`{"type":"text","text"}`."""
    return {"type": "text", "text": text}


def reasoning_block(text: str) -> dict[str, Any]:
    """`{"type":"reasoning","text"}`."""
    return {"type": "reasoning", "text": text}


def tool_call_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """`{"type":"tool-call","id","name","arguments"}` (arguments: the raw JSON string)."""
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def stop_reason(kind: str) -> FinishReason:
    """A fresh `{"kind": kind}` for `stop`, `tool-calls` or `max-tokens`."""
    return {"kind": kind}


def failed(kind: str, failure: LlmFailure) -> FinishReason:
    """`{"kind": "aborted"|"error", "failure": F}`."""
    return {"kind": kind, "failure": failure}
