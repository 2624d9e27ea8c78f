"""The chunk sequence of one scripted response (pure; docs/models.md).

Order: reasoning block → text block (none for empty text) → one block per tool call → usage →
finish. Deltas are consecutive `chunk_size` slices; a tool call with empty arguments gets one `""`
delta. `outputTokens` counts every emitted delta character (reasoning, text and arguments).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from plugins.llm import chunks
from plugins.llm.types import StreamChunk
from plugins.llm_replay.script import ReplayResponse
from plugins.llm_replay.script import compact_json as _compact


def pieces(text: str, size: int) -> list[str]:
    """Consecutive `size`-character slices of `text` (none for an empty string)."""
    return [text[start : start + size] for start in range(0, len(text), size)]


def input_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """`ceil(len(compact JSON of the messages) / 4)`."""
    return math.ceil(len(_compact(list(messages))) / 4)


class MessageSizes:
    """`input_tokens` of one session's successive requests, encoding only what each adds.

    The compact JSON of a list is `[`, its items' texts joined by `,`, then `]`, so its length
    follows from each message's own length. A request's messages that are the very objects of
    the last request's (its unchanged prefix: the session's logged messages) keep their
    lengths; the rest are encoded. The last request's list is held, so no object it names can
    be replaced by a new one at the same address.
    """

    __slots__ = ("_messages", "_sizes")

    def __init__(self) -> None:
        self._messages: list[Mapping[str, Any]] = []
        self._sizes: list[int] = []

    def input_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Same as `input_tokens(messages)`."""
        last = self._messages
        if all(map(operator.is_, last, messages)):  # the common case, compared in C
            kept = min(len(last), len(messages))
        else:
            pairs = enumerate(zip(last, messages, strict=False))
            kept = next(i for i, (old, new) in pairs if old is not new)
        sizes = self._sizes[:kept]
        sizes += [len(_compact(message)) for message in messages[kept:]]
        self._messages = list(messages)
        self._sizes = sizes
        return math.ceil((2 + sum(sizes) + max(len(sizes) - 1, 0)) / 4)


def response_chunks(
    response: ReplayResponse,
    messages: Sequence[Mapping[str, Any]],
    chunk_size: int,
    replay_state: Any = None,
    count_input: Callable[[Sequence[Mapping[str, Any]]], int] = input_tokens,
) -> Iterator[StreamChunk]:
    """Yield the chunks of a text/tool-call response (error responses are not chunked); the
    finish carries `replay_state` when given. `count_input` is `input_tokens` or a session's
    `MessageSizes.input_tokens`."""
    index = 0
    emitted = 0
    if response.reasoning:
        yield from _text_chunks(index, "reasoning", response.reasoning, chunk_size)
        emitted += len(response.reasoning)
        index += 1
    if response.text:
        yield from _text_chunks(index, "text", response.text, chunk_size)
        emitted += len(response.text)
        index += 1
    calls = response.tool_calls or []
    for call in calls:
        arguments = call.arguments_text()
        yield chunks.block_start(index, "tool-call")
        for number, piece in enumerate(pieces(arguments, chunk_size) or [""]):
            yield chunks.tool_call_delta(
                index, call.id, piece, name=call.name if number == 0 else None
            )
        yield chunks.block_end(index, chunks.tool_call_block(call.id, call.name, arguments))
        emitted += len(arguments)
        index += 1
    yield chunks.usage(
        {"inputTokens": count_input(messages), "outputTokens": math.ceil(emitted / 4)}
    )
    yield chunks.finish(chunks.stop_reason("tool-calls" if calls else "stop"), replay_state)


def _text_chunks(
    index: int, kind: Literal["text", "reasoning"], text: str, chunk_size: int
) -> Iterator[StreamChunk]:
    yield chunks.block_start(index, kind)
    if kind == "reasoning":
        for piece in pieces(text, chunk_size):
            yield chunks.reasoning_delta(index, piece)
        yield chunks.block_end(index, chunks.reasoning_block(text))
    else:
        for piece in pieces(text, chunk_size):
            yield chunks.text_delta(index, piece)
        yield chunks.block_end(index, chunks.text_block(text))
