"""Persisted messages → the OpenAI chat `messages` array, with history sanitation.

Conversion: the system prompt first; text blocks of a message are joined with `\\n`; an assistant
message carries `content` (None when it has no text) and `tool_calls`; reasoning is dropped unless
`echo_reasoning` (then `reasoning_content`, as DeepSeek's thinking mode requires); a `tool-result`
block becomes `{"role":"tool","tool_call_id","content"}`; images (or unknown blocks) raise
`UNSUPPORTED_CONTENT`.

Sanitation (deterministic), so that every tool call has exactly one result:
- an assistant message with neither text nor tool calls (e.g. an interrupted one) is not sent;
- a result whose call is not open (unknown id, or answered already) is dropped;
- calls still open when the next non-result message arrives (or at the end) are answered, right
  there in call order, with the text of `MISSING_RESULT`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from plugins.llm import LlmError

MISSING_RESULT = "Error: no result was recorded for this tool call"

WireMessage = dict[str, Any]


def to_wire_messages(
    system: str | None, messages: Sequence[Mapping[str, Any]], *, echo_reasoning: bool = False
) -> list[WireMessage]:
    """The provider transcript of a request."""
    out: list[WireMessage] = []
    if system:
        out.append({"role": "system", "content": system})
    open_calls: dict[str, None] = {}  # insertion-ordered set of unanswered call ids

    def close_open_calls() -> None:
        for call_id in open_calls:
            out.append({"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT})
        open_calls.clear()

    for message in messages:
        role = message.get("role")
        blocks = list(_blocks(message))
        results = [block for block in blocks if block.get("type") == "tool-result"]
        others = [block for block in blocks if block.get("type") != "tool-result"]
        for block in results:
            call_id = str(block.get("toolCallId", ""))
            if call_id in open_calls:
                del open_calls[call_id]
                out.append(
                    {"role": "tool", "tool_call_id": call_id, "content": _result_text(block)}
                )
        if results and not others:
            continue
        if role == "assistant":
            wire = _assistant(others, echo_reasoning)
            if wire is None:
                continue
            close_open_calls()
            out.append(wire)
            for call in wire.get("tool_calls", ()):
                open_calls[call["id"]] = None
        else:
            close_open_calls()
            out.append(
                {"role": "system" if role == "system" else "user", "content": _joined_text(others)}
            )
    close_open_calls()
    return out


def _blocks(message: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content or []


def _assistant(blocks: list[Mapping[str, Any]], echo_reasoning: bool) -> WireMessage | None:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "reasoning":
            reasoning.append(str(block.get("text", "")))
        elif kind == "tool-call":
            calls.append(
                {
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name", "")),
                        "arguments": str(block.get("arguments", "")),
                    },
                }
            )
        else:
            raise _unsupported(kind)
    text = "\n".join(texts)
    if not text and not calls:
        return None
    wire: WireMessage = {"role": "assistant", "content": text or None}
    if echo_reasoning and reasoning:
        wire["reasoning_content"] = "\n".join(reasoning)
    if calls:
        wire["tool_calls"] = calls
    return wire


def _joined_text(blocks: list[Mapping[str, Any]]) -> str:
    texts: list[str] = []
    for block in blocks:
        if block.get("type") != "text":
            raise _unsupported(block.get("type"))
        texts.append(str(block.get("text", "")))
    return "\n".join(texts)


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return _joined_text(list(content or []))


def _unsupported(kind: object) -> LlmError:
    return LlmError(
        f'the OpenAI-compatible adapter cannot send "{kind}" content blocks',
        "UNSUPPORTED_CONTENT",
    )


def transcript_call_ids(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ids of the tool calls the assistant messages of a transcript hold."""
    return {
        str(block.get("id"))
        for message in messages
        if message.get("role") == "assistant"
        for block in message.get("content", ())
        if isinstance(block, Mapping) and block.get("type") == "tool-call"
    }
