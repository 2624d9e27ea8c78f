"""The `llm` service: adapter routes, `prepare_call` and the lazy `llm/stream` waterfall."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Any

import anyio

from framework import Service
from plugins.llm import chunks
from plugins.llm.adapter import ENDS_AT_FINISH, LlmAdapter
from plugins.llm.errors import HarnessError, LlmError
from plugins.llm.hooks import STREAM
from plugins.llm.registry import AdapterHandle, Registration, Route, provider_list
from plugins.llm.retry import RetryPolicy
from plugins.llm.types import GenerateOptions, LlmFailure, ModelInfo, ProviderInfo, StreamChunk

if TYPE_CHECKING:
    from framework import AbortSignal, Context


class LlmService(Service):
    """Routes requests to provider adapters; `stream` runs the `llm/stream` waterfall.

    Registrations made through a context's view (`ctx.llm`) belong to that context's plugin and
    are removed when it is disposed.
    """

    provide = "llm"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self._routes: dict[str, Route] = {}

    def register_adapter(
        self, providers: str | Sequence[str], adapter: LlmAdapter
    ) -> AdapterHandle:
        """Route `providers` to `adapter` (all-or-nothing; `LlmError` `INVALID_ADAPTER` or
        `DUPLICATE_ADAPTER`). The returned handle disposes it; `.replace(list)` swaps routes."""
        names = provider_list(providers)
        registration = Registration(self._routes, adapter)

        def setup() -> Callable[[], None]:
            registration.install(names)
            return registration.dispose

        effect = self.caller.effect(setup)
        return AdapterHandle(registration, effect)

    def provider_info(self, provider: str) -> ProviderInfo | None:
        """The registered provider's metadata, or None."""
        route = self._routes.get(provider)
        return None if route is None else {"id": route.info["id"], "name": route.info["name"]}

    async def prepare_call(
        self, config: Mapping[str, Any], signal: AbortSignal | None = None
    ) -> PreparedCall:
        """Look the route up now (`NO_ADAPTER`), resolve the model and fill omitted
        `maxTokens`/`reasoningEffort` from its defaults (flagged in `adapter_defaults`)."""
        provider = str(config["provider"])
        model = str(config["model"])
        route = self._lookup(provider)
        info = await _resolve_model(route, model, signal)
        filled = dict(config)
        defaults: dict[str, bool] = {}
        if config.get("reasoningEffort") is None and info.default_reasoning_effort is not None:
            defaults["reasoningEffort"] = True
        if config.get("maxTokens") is None and info.default_max_tokens is not None:
            defaults["maxTokens"] = True
            filled["maxTokens"] = info.default_max_tokens
        if defaults.get("reasoningEffort"):
            filled["reasoningEffort"] = info.default_reasoning_effort
        context: dict[str, Any] = {"provider": provider, "model": model}
        if info.context_window is not None:
            context["contextWindow"] = info.context_window
        return PreparedCall(
            config=filled,
            retry_policy=route.retry_policy,
            adapter_defaults=defaults or None,
            context=context,
            _service=self,
            _route=route,
        )

    def stream(self, options: GenerateOptions) -> AsyncIterable[StreamChunk]:
        """Run `llm/stream` around the adapter; lazy (nothing downstream runs before iteration
        reaches it). Adapter failures become one terminal `finish` chunk."""
        return self._stream(options, None)

    def _stream(
        self, options: GenerateOptions, prepared: Route | None
    ) -> AsyncIterable[StreamChunk]:
        return self.caller.waterfall(
            STREAM, options, inner=lambda: self._adapter_stream(options, prepared)
        )

    def _lookup(self, provider: str) -> Route:
        route = self._routes.get(provider)
        if route is None:
            raise LlmError(f'no adapter registered for provider "{provider}"', "NO_ADAPTER")
        return route

    async def _adapter_stream(
        self, options: GenerateOptions, prepared: Route | None
    ) -> AsyncIterator[StreamChunk]:
        signal = options.signal
        try:
            if prepared is not None and self._routes.get(options.provider) is prepared:
                route = prepared
            else:
                route = self._lookup(options.provider)
                options = _with_defaults(
                    options, await _resolve_model(route, options.model, signal)
                )
            adapter = route.adapter
            ends_at_finish = getattr(adapter, ENDS_AT_FINISH, False) is True
            iterator = aiter(adapter.stream(options))
        except Exception as error:
            yield failure_chunk(error, signal)
            return
        failure: Exception | None = None
        try:
            while True:
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    return
                except Exception as error:
                    failure = error
                    break
                yield chunk
                if chunk.get("type") == "finish":
                    if ends_at_finish:
                        await _end(iterator)
                    return
        finally:
            await close_stream(iterator)
        yield failure_chunk(failure, signal)


@dataclass
class PreparedCall:
    """A looked-up route with its filled call config; `stream(options)` may be called once."""

    config: dict[str, Any]
    retry_policy: RetryPolicy
    adapter_defaults: dict[str, bool] | None
    context: dict[str, Any] | None
    _service: LlmService = field(repr=False)
    _route: Route = field(repr=False)
    _used: bool = field(default=False, repr=False)

    def stream(self, options: GenerateOptions) -> AsyncIterable[StreamChunk]:
        """Like `llm.stream`, on the prepared route (if it is still registered) and without
        resolving the model again."""
        if self._used:
            raise RuntimeError("a prepared call can be streamed only once; prepare it again")
        self._used = True
        return self._service._stream(options, self._route)


def failure_chunk(error: Exception, signal: AbortSignal | None) -> StreamChunk:
    """The terminal finish chunk for an adapter-side exception (docs/models.md)."""
    failure: LlmFailure
    if isinstance(error, LlmError):
        failure = LlmFailure(**error.failure)  # a copy: chunks are persisted verbatim
    else:
        code = error.code if isinstance(error, HarnessError) else "UNKNOWN"
        failure = {"message": str(error) or "LLM adapter failed", "code": code}
    aborted = (signal is not None and signal.aborted) or failure["code"] == "ABORTED"
    return chunks.finish(chunks.failed("aborted" if aborted else "error", failure))


async def _resolve_model(route: Route, model: str, signal: AbortSignal | None) -> ModelInfo:
    resolve: Any = getattr(route.adapter, "resolve_model", None)
    if resolve is None:
        return ModelInfo()
    info = await resolve(route.provider, model, signal)
    if not isinstance(info, ModelInfo):
        raise TypeError(
            f'resolve_model("{route.provider}", "{model}") must return a ModelInfo, '
            f"got {type(info).__name__}"
        )
    return info


def _with_defaults(options: GenerateOptions, info: ModelInfo) -> GenerateOptions:
    changes: dict[str, Any] = {}
    if options.max_tokens is None and info.default_max_tokens is not None:
        changes["max_tokens"] = info.default_max_tokens
    if options.reasoning_effort is None and info.default_reasoning_effort is not None:
        changes["reasoning_effort"] = info.default_reasoning_effort
    return dataclasses.replace(options, **changes) if changes else options


async def _end(iterator: AsyncIterator[StreamChunk]) -> None:
    """Resume an adapter's stream that declares it ends at its finish chunk, so that it returns
    and needs no (shielded) close. One that breaks the declaration is closed like any other;
    what it yields or raises instead comes after the finish and is dropped, as chunks after a
    finish are (docs/models.md)."""
    with contextlib.suppress(Exception):
        await anext(iterator)


async def close_stream(stream: AsyncIterable[StreamChunk]) -> None:
    """Close a stream that may be unfinished, shielded (an abort must not skip the adapter's
    cleanup). An async generator that has already returned has nothing to close."""
    if isinstance(stream, AsyncGeneratorType) and stream.ag_frame is None:
        return
    aclose: Any = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
