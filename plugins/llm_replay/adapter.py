"""The replay adapter: serves scripted responses in order, one cursor per session."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from plugins.llm import GenerateOptions, LlmError, ModelInfo, StreamChunk
from plugins.llm_replay.chunks import MessageSizes, response_chunks
from plugins.llm_replay.script import ReplayResponse

if TYPE_CHECKING:
    from framework.signal import AbortSignal


#: How many sessions' message lengths an adapter keeps (`MessageSizes`).
_SIZED = 4096


class ReplayAdapter:
    """Any model of its providers is served from the same script.

    A session's cursor (in memory) advances when its stream is first iterated, so a vetoed or
    never-iterated request consumes nothing. A session first seen by this process continues where
    its transcript is: each served response's finish carries `replayState {"script", "next"}`
    (kept in the assistant message's source), and the cursor starts at the `next` of the last
    message this same script produced, else at 0 (docs/tools-and-cancellation.md). Before each
    chunk the adapter sleeps `delay_ms` (abortable) and then raises `LlmError("replay aborted",
    "ABORTED")` if the request's signal has aborted. A scripted `error` arrives like a chunk
    (same delay and check).
    """

    #: Its stream returns right after the finish chunk (docs/models.md).
    ends_at_finish: Final = True

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
        #: The message lengths of the latest sessions' last requests (at most `_SIZED`).
        self._sizes: dict[str | None, MessageSizes] = {}
        #: Names this script in `replayState`, so a resumed session continues only its own script.
        self.script_id = script_id(self._responses)

    def __repr__(self) -> str:
        return f"ReplayAdapter(responses={len(self._responses)})"

    async def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None
    ) -> ModelInfo:
        """Every model has the configured context window."""
        return ModelInfo(context_window=self._context_window)

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Serve the session's next scripted response."""
        request = self._cursors.get(options.session_id)
        if request is None:
            request = resumed_cursor(options.messages, self.script_id)
        self._cursors[options.session_id] = request + 1
        if request >= len(self._responses):
            raise LlmError(
                f"replay script exhausted: request {request + 1} but only "
                f"{len(self._responses)} responses are configured",
                "REPLAY_EXHAUSTED",
            )
        response = self._responses[request].served(options.messages)
        if response.error is not None:
            await self._sleep(options.signal)
            _check_aborted(options.signal)
            raise LlmError(response.error.message, response.error.code)
        state = {"script": self.script_id, "next": request + 1}
        count = self._sized(options.session_id).input_tokens
        signal = options.signal
        for chunk in response_chunks(response, options.messages, self._chunk_size, state, count):
            if self._delay_s > 0:  # no coroutine per chunk without a delay
                await self._sleep(signal)
            _check_aborted(signal)
            yield chunk

    def _sized(self, session_id: str | None) -> MessageSizes:
        sizes = self._sizes.pop(session_id, None)
        if sizes is None:
            sizes = MessageSizes()
            if len(self._sizes) >= _SIZED:
                del self._sizes[next(iter(self._sizes))]  # the least recently served
        self._sizes[session_id] = sizes
        return sizes

    async def _sleep(self, signal: AbortSignal | None) -> None:
        """The delay before a chunk (cut short by an abort)."""
        if self._delay_s > 0:
            if signal is None:
                await anyio.sleep(self._delay_s)
            else:
                with anyio.move_on_after(self._delay_s):
                    await signal.wait()


def _check_aborted(signal: AbortSignal | None) -> None:
    """After the delay, an aborted request's stream ends with `ABORTED`."""
    if signal is not None and signal.aborted:
        raise LlmError("replay aborted", "ABORTED")


def script_id(responses: Sequence[ReplayResponse]) -> str:
    """A short digest of the script's items (the same script gives the same id in any process)."""
    items = [response.model_dump(mode="json", exclude_none=True) for response in responses]
    text = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resumed_cursor(messages: Sequence[Mapping[str, Any]], script: str) -> int:
    """Where `script` left off in a transcript: the `next` of its latest response, else 0."""
    for message in reversed(messages):
        source = message.get("source")
        if message.get("role") != "assistant" or not isinstance(source, Mapping):
            continue
        state = source.get("replayState")
        if isinstance(state, Mapping) and state.get("script") == script:
            cursor = state.get("next")
            if type(cursor) is int and cursor >= 0:
                return cursor
    return 0
