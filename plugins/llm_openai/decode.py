"""Chat-completion stream events → stream chunks (pure).

Deltas stream at once (a block opens with its first non-empty delta). At `[DONE]` the open blocks
end in index order, then the last usage, then the finish reason, or the failure to raise.

A call id must be unique in the session (the agent refuses a response that reuses one,
`DUPLICATE_TOOL_CALL_ID`), but some OpenAI-compatible servers send none or number their calls
afresh in every response (`call_0`). A call whose id is missing, or already used by the
transcript or by an earlier call of this response, gets `call-<n>` (the lowest `n` not used):
the transcript then carries that id, and it is what the server sees in the next request
(docs/models.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plugins.llm import LlmError, StreamChunk, TokenUsage, chunks

_FINISH_KINDS = {"stop": "stop", "tool_calls": "tool-calls", "length": "max-tokens"}


@dataclass
class _Block:
    index: int
    kind: str
    parts: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str | None = None
    name_sent: bool = False


class ChatStreamDecoder:
    """Decodes one response; `event(payload)` per `data:` object, `done()` at `[DONE]`."""

    def __init__(self, used_ids: Iterable[str] = ()) -> None:
        """`used_ids`: the call ids the request's transcript already holds."""
        self._used = set(used_ids)
        self._blocks: dict[object, _Block] = {}
        self._usage: TokenUsage | None = None
        self._finish_reason: str | None = None

    def event(self, payload: Any) -> list[StreamChunk]:
        """The chunks of one decoded `data:` object (`MALFORMED_RESPONSE` if it is not one)."""
        if not isinstance(payload, Mapping):
            raise LlmError("stream event is not a JSON object", "MALFORMED_RESPONSE")
        error = payload.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, Mapping) else None
            raise LlmError(str(message or "OpenAI-compatible stream reported an error"), "SERVER")
        usage = payload.get("usage")
        if isinstance(usage, Mapping):
            self._usage = _usage(usage)
        out: list[StreamChunk] = []
        for choice in payload.get("choices") or ():
            if not isinstance(choice, Mapping):
                raise LlmError("stream choice is not a JSON object", "MALFORMED_RESPONSE")
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise LlmError("stream delta is not a JSON object", "MALFORMED_RESPONSE")
            reasoning = delta.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                out.extend(self._text("reasoning", reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.extend(self._text("text", content))
            for position, call in enumerate(delta.get("tool_calls") or ()):
                out.extend(self._tool_call(position, call))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return out

    def done(self) -> tuple[list[StreamChunk], LlmError | None]:
        """The closing chunks, and the failure to raise after them (if the model failed)."""
        out: list[StreamChunk] = []
        for block in sorted(self._blocks.values(), key=lambda b: b.index):
            out.append(chunks.block_end(block.index, _block_json(block)))
        if self._usage is not None:
            out.append(chunks.usage(self._usage))
        reason = self._finish_reason or "stop"
        kind = _FINISH_KINDS.get(reason)
        if kind is None:
            return out, LlmError(f"model stopped: {reason}", reason.upper())
        if kind == "stop" and not self._blocks:
            return out, LlmError(
                "model returned a completed response with no content", "EMPTY_RESPONSE"
            )
        out.append(chunks.finish(chunks.stop_reason(kind)))
        return out, None

    def _open(self, key: object, kind: str, out: list[StreamChunk]) -> _Block:
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _Block(len(self._blocks), kind)
            out.append(chunks.block_start(block.index, kind))  # type: ignore[arg-type]
        return block

    def _unique(self, wire_id: str) -> str:
        call_id = wire_id
        minted = 0
        while not call_id or call_id in self._used:
            call_id = f"call-{minted}"
            minted += 1
        self._used.add(call_id)
        return call_id

    def _text(self, kind: str, text: str) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        block = self._open(kind, kind, out)
        block.parts.append(text)
        if kind == "reasoning":
            out.append(chunks.reasoning_delta(block.index, text))
        else:
            out.append(chunks.text_delta(block.index, text))
        return out

    def _tool_call(self, position: int, call: Any) -> list[StreamChunk]:
        if not isinstance(call, Mapping):
            raise LlmError("stream tool call is not a JSON object", "MALFORMED_RESPONSE")
        out: list[StreamChunk] = []
        wire_index = call.get("index", position)
        block = self._open(("tool", wire_index), "tool-call", out)
        if not block.call_id:
            block.call_id = self._unique(str(call.get("id") or ""))
        function = call.get("function") or {}
        if not isinstance(function, Mapping):
            raise LlmError("stream tool call function is not a JSON object", "MALFORMED_RESPONSE")
        if function.get("name") and block.name is None:
            block.name = str(function["name"])
        arguments = function.get("arguments")
        piece = arguments if isinstance(arguments, str) else ""
        block.parts.append(piece)
        send_name = block.name is not None and not block.name_sent
        if piece or send_name:
            block.name_sent = block.name_sent or send_name
            out.append(
                chunks.tool_call_delta(
                    block.index, block.call_id, piece, name=block.name if send_name else None
                )
            )
        return out


def _block_json(block: _Block) -> dict[str, Any]:
    text = "".join(block.parts)
    if block.kind == "tool-call":
        return chunks.tool_call_block(block.call_id, block.name or "", text)
    if block.kind == "reasoning":
        return chunks.reasoning_block(text)
    return chunks.text_block(text)


def _usage(raw: Mapping[str, Any]) -> TokenUsage:
    prompt = _int(raw.get("prompt_tokens"))
    details = raw.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    cached = cached or _int(raw.get("prompt_cache_hit_tokens"))
    usage: TokenUsage = {
        "inputTokens": max(prompt - cached, 0),
        "outputTokens": _int(raw.get("completion_tokens")),
    }
    if cached:
        usage["cacheReadTokens"] = cached
    completion_details = raw.get("completion_tokens_details")
    if isinstance(completion_details, Mapping) and completion_details.get("reasoning_tokens"):
        usage["reasoningTokens"] = _int(completion_details["reasoning_tokens"])
    return usage


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
