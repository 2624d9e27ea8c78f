"""The OpenAI-compatible chat-completions adapter (docs/models.md).

One `httpx.AsyncClient`, no internal retries. The API key is read from the environment for each
request, validated, and only ever placed in the `Authorization` header: it is not stored, logged,
or put in a repr; every failure the adapter reports passes `secrets.scrubbed_failure`
(docs/security.md). Sending the request and every read run in `abort_scope(options.signal)`; an
abort becomes `LlmError` `ABORTED`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx

from framework import AbortError, abort_scope
from plugins.llm import GenerateOptions, LlmError, ModelInfo, RetryPolicy, StreamChunk
from plugins.llm_openai.decode import ChatStreamDecoder
from plugins.llm_openai.failures import http_error
from plugins.llm_openai.secrets import ApiKey, scrubbed_failure
from plugins.llm_openai.sse import SseDecoder
from plugins.llm_openai.transcript import to_wire_messages, transcript_call_ids

if TYPE_CHECKING:
    from framework import AbortSignal

T = TypeVar("T")

DRAIN_S = 1.0
"""How long to wait for the end of the body after `[DONE]` before closing the connection."""


class OpenAIAdapter:
    """Streams chat completions from `<base_url>/chat/completions`."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        model: str | None = None,
        timeout_s: float = 60,
        max_tokens: int | None = None,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        idempotency_header: str | None = None,
        retry_policy: RetryPolicy | None = None,
        echo_reasoning: bool = False,
    ) -> None:
        self._client = client
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key_env = api_key_env
        self._model = model
        self._timeout = httpx.Timeout(timeout_s)
        self._timeout_s = timeout_s
        self._model_info = ModelInfo(context_window=context_window, default_max_tokens=max_tokens)
        self._headers = dict(headers or {})
        self._idempotency_header = idempotency_header
        self._retry_policy = retry_policy
        self._echo_reasoning = echo_reasoning

    def __repr__(self) -> str:
        return f"OpenAIAdapter(url={self._url!r}, api_key_env={self._api_key_env!r})"

    def provider_retry_policy(self, provider: str) -> RetryPolicy | None:
        """The configured policy (None → the service default)."""
        return self._retry_policy

    async def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None
    ) -> ModelInfo:
        """Every model gets the configured `context_window` and default `max_tokens`."""
        return self._model_info

    def request_body(self, options: GenerateOptions) -> dict[str, Any]:
        """The JSON body of a request (`UNSUPPORTED_CONTENT` for images)."""
        body: dict[str, Any] = {
            "model": options.model or self._model or "",
            "messages": to_wire_messages(
                options.system, options.messages, echo_reasoning=self._echo_reasoning
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if options.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool["name"],
                        "description": tool["description"],
                        "parameters": tool["parameters"],
                    },
                }
                for tool in options.tools
            ]
        if options.max_tokens is not None:
            body["max_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.stop:
            body["stop"] = list(options.stop)
        if options.reasoning_effort is not None:
            body["reasoning_effort"] = options.reasoning_effort
        return body

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """One streamed request; failures raise `LlmError` (the llm service makes the finish)."""
        key = None if self._api_key_env is None else ApiKey.read(self._api_key_env)
        try:
            body = self.request_body(options)
            headers = self._request_headers(key, options)
            async with AsyncExitStack() as stack:
                request = self._client.build_request(
                    "POST", self._url, json=body, headers=headers, timeout=self._timeout
                )
                response = await self._guard(
                    options.signal, lambda: self._client.send(request, stream=True)
                )
                stack.push_async_callback(response.aclose)
                if response.status_code >= 300:
                    content = await self._guard(options.signal, response.aread)
                    raise http_error(response.status_code, response.headers, content, time.time())
                lines = response.aiter_lines()
                stack.push_async_callback(lines.aclose)  # type: ignore[attr-defined]
                sse = SseDecoder()
                decoder = ChatStreamDecoder(transcript_call_ids(options.messages))
                while True:
                    line = await self._guard(options.signal, lambda: anext(lines, None))
                    data = sse.flush() if line is None else sse.feed(line)
                    if data == "[DONE]":
                        if line is not None:
                            await _drain(lines)
                        out, failure = decoder.done()
                        for chunk in out:
                            yield chunk
                        if failure is not None:
                            raise failure
                        return
                    if data is not None:
                        for chunk in decoder.event(_parse(data)):
                            yield chunk
                    if line is None:
                        raise LlmError(
                            "stream ended before [DONE]", "STREAM_CLOSED", request_id=_rid(response)
                        )
        except Exception as error:
            raise scrubbed_failure(error, key) from None

    def _request_headers(self, key: ApiKey | None, options: GenerateOptions) -> httpx.Headers:
        headers = httpx.Headers({"Accept": "text/event-stream", **self._headers})
        if key is not None:
            headers.update({b"Authorization": key.authorization()})
        if self._idempotency_header and options.idempotency_key:
            headers[self._idempotency_header] = options.idempotency_key
        return headers

    async def _guard(self, signal: AbortSignal | None, operation: Callable[[], Awaitable[T]]) -> T:
        """Run one network step in the request's abort scope, mapping transport failures."""
        try:
            if signal is None:
                return await operation()
            with abort_scope(signal):
                return await operation()
        except AbortError:
            raise LlmError("OpenAI-compatible request aborted", "ABORTED") from None
        except httpx.TimeoutException:
            raise LlmError(
                f"OpenAI-compatible API timed out after {self._timeout_s:g}s", "TIMEOUT"
            ) from None
        except httpx.TransportError as error:
            raise LlmError(
                f"OpenAI-compatible API transport error: {type(error).__name__}: {error}",
                "TRANSPORT",
            ) from None


async def _drain(lines: AsyncIterator[str]) -> None:
    """Read the (normally empty) rest of the body, so the connection can be reused."""
    with anyio.move_on_after(DRAIN_S):
        try:
            async for _ in lines:
                pass
        except httpx.HTTPError:
            pass


def _parse(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise LlmError(
            f"stream event is not valid JSON: {data[:200]}", "MALFORMED_RESPONSE"
        ) from None


def _rid(response: httpx.Response) -> str | None:
    return response.headers.get("x-request-id") or None
