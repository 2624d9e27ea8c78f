"""The replay adapter: serves scripted responses in order, one cursor per session (spec 03 §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

import anyio

from plugins.llm import GenerateOptions, LlmError, ModelInfo, StreamChunk
from plugins.llm_replay.chunks import response_chunks
from plugins.llm_replay.script import ReplayResponse

if TYPE_CHECKING:
    from framework.signal import AbortSignal


class ReplayAdapter:
    """Any model of its providers is served from the same script.

    A session's cursor (in memory, from 0 per process) advances when its stream is first
    iterated, so a vetoed or never-iterated request consumes nothing. Before each chunk the adapter
    sleeps `delay_ms` (abortable) and then raises `LlmError("replay aborted", "ABORTED")` if the
    request's signal has aborted. A scripted `error` arrives like a chunk (same delay and check).
    """

    def __init__(
        self,
        responses: Sequence[ReplayResponse],
        *,
        context_window: int = 128000,
        chunk_size: int = 8,
        delay_ms: float = 0,
    ) -> None:
        self._responses = tuple(responses)
        self._context_window = context_window
        self._chunk_size = chunk_size
        self._delay_s = delay_ms / 1000
        self._cursors: dict[str | None, int] = {}

    def __repr__(self) -> str:
        return f"ReplayAdapter(responses={len(self._responses)})"

    async def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None
    ) -> ModelInfo:
        """Every model has the configured context window."""
        return ModelInfo(context_window=self._context_window)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Serve the session's next scripted response."""
        request = self._cursors.get(options.session_id, 0)
        self._cursors[options.session_id] = request + 1
        if request >= len(self._responses):
            raise LlmError(
                f"replay script exhausted: request {request + 1} but only "
                f"{len(self._responses)} responses are configured",
                "REPLAY_EXHAUSTED",
            )
        response = self._responses[request]
        if response.error is not None:
            await self._before_chunk(options.signal)
            raise LlmError(response.error.message, response.error.code)
        for chunk in response_chunks(response, options.messages, self._chunk_size):
            await self._before_chunk(options.signal)
            yield chunk

    async def _before_chunk(self, signal: AbortSignal | None) -> None:
        if self._delay_s > 0:
            if signal is None:
                await anyio.sleep(self._delay_s)
            else:
                with anyio.move_on_after(self._delay_s):
                    await signal.wait()
        if signal is not None and signal.aborted:
            raise LlmError("replay aborted", "ABORTED")
