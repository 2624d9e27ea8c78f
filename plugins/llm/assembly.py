"""Block assembly: stream chunks → the assistant message content (docs/models.md).

Rules: blocks appear in first-seen index order; deltas append; the first `block-end` of an index
wins and later deltas or ends for it are ignored; blocks still open assemble from their deltas
(a tool call without an id gets `call-<index>`; an open image has no data and is dropped); the
last `usage` and `finish` win; no finish means `stop`; `max-tokens` drops tool calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from plugins.llm import chunks
from plugins.llm.types import FinishReason, JsonObject, StreamChunk, TokenUsage

_DELTA_BLOCK_TYPES = {
    "text-delta": "text",
    "reasoning-delta": "reasoning",
    "tool-call-delta": "tool-call",
}


@dataclass
class _Partial:
    """An index's block while it is open (no `block-end` seen yet)."""

    block_type: str | None
    parts: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class AssembledResponse:
    """The assembled content, the last usage (if any) and the finish reason."""

    blocks: list[JsonObject]
    usage: TokenUsage | None
    finish: FinishReason


class BlockAssembler:
    """Feed chunks with `add`; read `result()` or, after an abort, `interrupted_blocks()`."""

    def __init__(self) -> None:
        self._order: list[int] = []
        self._open: dict[int, _Partial] = {}
        self._ended: dict[int, JsonObject] = {}
        self._usage: TokenUsage | None = None
        self._finish: FinishReason | None = None

    def add(self, chunk: StreamChunk) -> None:
        """Apply one chunk."""
        kind = chunk.get("type")
        if kind == "usage":
            self._usage = chunk["usage"]
            return
        if kind == "finish":
            self._finish = chunk["reason"]
            return
        index = chunk.get("index")
        if not isinstance(index, int) or index in self._ended:
            return
        partial = self._open.get(index)
        if kind == "block-end":
            if partial is None:
                self._order.append(index)
            else:
                del self._open[index]
            self._ended[index] = chunk["block"]
            return
        if kind == "block-start":
            if partial is None:
                self._order.append(index)
                self._open[index] = _Partial(chunk.get("blockType"))
            elif partial.block_type is None:
                partial.block_type = chunk.get("blockType")
            return
        delta_type = _DELTA_BLOCK_TYPES.get(str(kind))
        if delta_type is None:
            return
        if partial is None:
            self._order.append(index)
            partial = self._open[index] = _Partial(delta_type)
        if partial.block_type != delta_type:
            return
        if delta_type == "tool-call":
            if partial.call_id is None and chunk.get("id"):
                partial.call_id = chunk["id"]
            if partial.name is None and chunk.get("name") is not None:
                partial.name = chunk["name"]
            partial.parts.append(chunk.get("argumentsDelta", ""))
        else:
            partial.parts.append(chunk.get("text", ""))

    def blocks(self) -> list[JsonObject]:
        """Every block so far, open ones assembled from their deltas."""
        out: list[JsonObject] = []
        for index in self._order:
            ended = self._ended.get(index)
            if ended is not None:
                out.append(ended)
                continue
            block = _close(index, self._open[index])
            if block is not None:
                out.append(block)
        return out

    def result(self) -> AssembledResponse:
        """The response as the model finished it (`stop` when no finish chunk arrived)."""
        finish = self._finish if self._finish is not None else chunks.stop_reason("stop")
        blocks = self.blocks()
        if finish.get("kind") == "max-tokens":
            blocks = [block for block in blocks if block.get("type") != "tool-call"]
        return AssembledResponse(blocks, self._usage, finish)

    def interrupted_blocks(self) -> list[JsonObject]:
        """The non-blank text and reasoning blocks (what an interrupted message keeps)."""
        return [
            block
            for block in self.blocks()
            if block.get("type") in ("text", "reasoning") and str(block.get("text", "")).strip()
        ]


def _close(index: int, partial: _Partial) -> JsonObject | None:
    text = "".join(partial.parts)
    if partial.block_type == "text":
        return chunks.text_block(text)
    if partial.block_type == "reasoning":
        return chunks.reasoning_block(text)
    if partial.block_type == "tool-call":
        call_id = partial.call_id or f"call-{index}"
        return chunks.tool_call_block(call_id, partial.name or "", text)
    return None


def assemble(stream: Iterable[StreamChunk]) -> AssembledResponse:
    """Assemble a complete list of chunks."""
    assembler = BlockAssembler()
    for chunk in stream:
        assembler.add(chunk)
    return assembler.result()
