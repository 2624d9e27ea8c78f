"""The llm service: registration, prepare_call and the lazy `llm/stream` waterfall."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.lowlevel import checkpoint

import plugins.llm
from framework import AbortController, AbortSignal, Context, FiberState, FrameworkError, Scope
from plugins.llm import (
    GenerateOptions,
    HarnessError,
    LlmError,
    LlmService,
    ModelInfo,
    RetryPolicy,
    StreamChunk,
    chunks,
    close_stream,
)

pytestmark = pytest.mark.anyio

TEXT = [
    chunks.block_start(0, "text"),
    chunks.text_delta(0, "hi"),
    chunks.block_end(0, chunks.text_block("hi")),
    chunks.finish(chunks.stop_reason("stop")),
]


class Adapter:
    """A scripted adapter: yields `script`, then raises `error` (if any); records everything."""

    def __init__(self, script: list[StreamChunk] | None = None, error: Exception | None = None):
        self.script = TEXT if script is None else script
        self.error = error
        self.requests: list[GenerateOptions] = []
        self.closed = 0
        self.hang = False

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        self.requests.append(options)
        try:
            for chunk in self.script:
                yield chunk
            if self.hang:
                await anyio.sleep_forever()
            if self.error is not None:
                raise self.error
        finally:
            self.closed += 1


def options(
    provider: str = "p", signal: AbortSignal | None = None, **extra: Any
) -> GenerateOptions:
    return GenerateOptions(provider=provider, model="m", messages=[], signal=signal, **extra)


async def collect(stream: Any) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def mount(root: Context) -> LlmService:
    await root.plugin(plugins.llm)
    llm: LlmService = root.llm
    return llm


async def test_stream_passes_adapter_chunks_through() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        llm.register_adapter("p", adapter)
        assert await collect(llm.stream(options())) == TEXT
        assert adapter.closed == 1


async def test_async_generator_wrapper_defers_everything_downstream() -> None:
    async with Context() as root:
        llm = await mount(root)
        log: list[str] = []
        gate = anyio.Event()

        def outer(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
            log.append("outer")

            async def wrapper() -> AsyncIterator[StreamChunk]:
                log.append("outer-iterated")
                await gate.wait()
                async for chunk in next():
                    yield chunk

            return wrapper()

        def inner(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
            log.append("inner")
            return next()

        root.on("llm/stream", outer)
        root.on("llm/stream", inner)
        stream = llm.stream(options())
        assert log == ["outer"]  # the outermost listener runs inside stream()
        # The route does not exist yet: lookup must wait for the first iteration past the gate.
        adapter = Adapter()
        got: list[StreamChunk] = []
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                got.extend(await collect(stream))

            tg.start_soon(consume)
            await wait_all_tasks_blocked()
            assert log == ["outer", "outer-iterated"]
            llm.register_adapter("p", adapter)
            assert adapter.requests == []
            gate.set()
        assert log == ["outer", "outer-iterated", "inner"]
        assert got == TEXT
        assert len(adapter.requests) == 1


async def test_never_iterated_stream_constructs_nothing() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        llm.register_adapter("p", adapter)
        stream = llm.stream(options())
        await checkpoint()
        del stream
        assert adapter.requests == []


async def test_listener_must_return_async_iterable() -> None:
    async with Context() as root:
        llm = await mount(root)
        root.on("llm/stream", lambda opts, next: [chunks.finish({"kind": "stop"})])
        with pytest.raises(TypeError) as caught:
            llm.stream(options())
        assert str(caught.value) == "llm/stream listener must return an async iterable"


async def test_inner_listener_must_return_async_iterable_too() -> None:
    async with Context() as root:
        llm = await mount(root)
        root.on("llm/stream", lambda opts, next: next())
        root.on("llm/stream", lambda opts, next: None)
        with pytest.raises(TypeError) as caught:
            llm.stream(options())
        assert str(caught.value) == "llm/stream listener must return an async iterable"


async def test_next_is_one_shot() -> None:
    async with Context() as root:
        llm = await mount(root)
        llm.register_adapter("p", Adapter())

        def twice(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
            next()
            return next()

        root.on("llm/stream", twice)
        with pytest.raises(FrameworkError, match="called more than once"):
            llm.stream(options())


async def test_listener_order_and_scopes() -> None:
    async with Context() as root:
        llm = await mount(root)
        llm.register_adapter("p", Adapter())
        log: list[str] = []

        def listener(label: str) -> Callable[[GenerateOptions, Callable[[], Any]], Any]:
            def wrap(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
                log.append(f"{label}-in")
                result = next()
                log.append(f"{label}-out")
                return result

            return wrap

        root.on("llm/stream", listener("A"))
        root.on("llm/stream", listener("B"))
        root.on("llm/stream", listener("P"), prepend=True)
        scoped = root.scoped(Scope())
        scoped.on("llm/stream", listener("S"))
        assert await collect(llm.stream(options())) == TEXT
        assert log == ["P-in", "A-in", "B-in", "B-out", "A-out", "P-out"]
        log.clear()
        await collect(scoped.llm.stream(options()))
        assert log == ["P-in", "A-in", "B-in", "S-in", "S-out", "B-out", "A-out", "P-out"]


async def test_vetoing_listener_skips_adapter() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        llm.register_adapter("p", adapter)

        async def veto(
            opts: GenerateOptions, next: Callable[[], Any]
        ) -> AsyncIterator[StreamChunk]:
            yield chunks.finish(chunks.stop_reason("stop"))

        root.on("llm/stream", veto)
        assert await collect(llm.stream(options())) == [
            {"type": "finish", "reason": {"kind": "stop"}}
        ]
        assert adapter.requests == []


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (RuntimeError("boom"), {"message": "boom", "code": "UNKNOWN"}),
        (RuntimeError(), {"message": "LLM adapter failed", "code": "UNKNOWN"}),
        (HarnessError("bad", "SOME_CODE"), {"message": "bad", "code": "SOME_CODE"}),
        (
            LlmError("slow", "RATE_LIMIT", status=429, provider_retry_after_ms=10),
            {"message": "slow", "code": "RATE_LIMIT", "status": 429, "providerRetryAfterMs": 10},
        ),
    ],
)
async def test_adapter_failure_becomes_one_terminal_finish(
    error: Exception, failure: dict[str, Any]
) -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter(TEXT[:2], error)
        llm.register_adapter("p", adapter)
        got = await collect(llm.stream(options()))
        assert got == [
            *TEXT[:2],
            {"type": "finish", "reason": {"kind": "error", "failure": failure}},
        ]
        if isinstance(error, LlmError):
            assert got[-1]["reason"]["failure"] is not error.failure


async def test_failures_before_the_first_chunk_become_finish() -> None:
    class Broken:
        def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
            raise LlmError("refused", "INVALID_REQUEST")

    class BadModel(Adapter):
        async def resolve_model(self, provider: str, model: str, signal: Any) -> ModelInfo:
            raise RuntimeError(f"unknown model {model}")

    async with Context() as root:
        llm = await mount(root)
        llm.register_adapter("broken", Broken())
        llm.register_adapter("bad-model", BadModel())
        cases = {
            "broken": {"message": "refused", "code": "INVALID_REQUEST"},
            "bad-model": {"message": "unknown model m", "code": "UNKNOWN"},
            "missing": {
                "message": 'no adapter registered for provider "missing"',
                "code": "NO_ADAPTER",
            },
        }
        for provider, failure in cases.items():
            got = await collect(llm.stream(options(provider)))
            assert got == [{"type": "finish", "reason": {"kind": "error", "failure": failure}}]


async def test_aborted_signal_or_code_makes_aborted_finish() -> None:
    async with Context() as root:
        llm = await mount(root)
        controller = AbortController()
        adapter = Adapter(TEXT[:2], RuntimeError("cut"))
        llm.register_adapter("p", adapter)
        controller.abort()
        got = await collect(llm.stream(options(signal=controller.signal)))
        assert got[-1] == {
            "type": "finish",
            "reason": {"kind": "aborted", "failure": {"message": "cut", "code": "UNKNOWN"}},
        }
        llm.register_adapter("q", Adapter([], LlmError("replay aborted", "ABORTED")))
        got = await collect(llm.stream(options("q")))
        assert got == [
            {
                "type": "finish",
                "reason": {
                    "kind": "aborted",
                    "failure": {"message": "replay aborted", "code": "ABORTED"},
                },
            }
        ]


async def test_consumer_exception_propagates_and_closes_adapter() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        llm.register_adapter("p", adapter)
        stream = llm.stream(options())
        assert isinstance(stream, AsyncGenerator)
        assert await anext(stream) == TEXT[0]
        with pytest.raises(ValueError, match="consumer"):
            await stream.athrow(ValueError("consumer"))
        assert adapter.closed == 1


async def test_early_close_closes_the_adapter_iterator() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        llm.register_adapter("p", adapter)
        stream = llm.stream(options())
        assert isinstance(stream, AsyncGenerator)
        await anext(stream)
        await stream.aclose()
        assert adapter.closed == 1


async def test_nothing_follows_finish() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter([*TEXT, chunks.text_delta(0, "late")], RuntimeError("late"))
        llm.register_adapter("p", adapter)
        assert await collect(llm.stream(options())) == TEXT
        assert adapter.closed == 1


async def test_cancellation_is_never_a_finish_chunk() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter(TEXT[:2])
        adapter.hang = True
        llm.register_adapter("p", adapter)
        got: list[StreamChunk] = []
        with anyio.move_on_after(0.05) as scope:
            async for chunk in llm.stream(options()):
                got.append(chunk)
        assert scope.cancelled_caught
        assert got == TEXT[:2]
        assert adapter.closed == 1


async def test_stream_fills_model_defaults() -> None:
    class WithDefaults(Adapter):
        async def resolve_model(self, provider: str, model: str, signal: Any) -> ModelInfo:
            return ModelInfo(default_max_tokens=99, default_reasoning_effort="high")

    async with Context() as root:
        llm = await mount(root)
        adapter = WithDefaults()
        llm.register_adapter("p", adapter)
        await collect(llm.stream(options()))
        await collect(llm.stream(options(max_tokens=5)))
        assert [(o.max_tokens, o.reasoning_effort) for o in adapter.requests] == [
            (99, "high"),
            (5, "high"),
        ]


# -- registration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ([], "an adapter must register at least one provider"),
        (["ok", ""], "adapter provider names must be non-empty"),
    ],
)
async def test_invalid_registrations(providers: list[str], message: str) -> None:
    async with Context() as root:
        llm = await mount(root)
        with pytest.raises(LlmError) as caught:
            llm.register_adapter(providers, Adapter())
        assert (str(caught.value), caught.value.code) == (message, "INVALID_ADAPTER")
        assert llm.provider_info("ok") is None


async def test_metadata_must_keep_id_and_name() -> None:
    class Renamer(Adapter):
        def __init__(self, info: Any) -> None:
            super().__init__()
            self.info = info

        def provider_info(self, provider: str) -> Any:
            return self.info

    async with Context() as root:
        llm = await mount(root)
        for info in ({"id": "other", "name": "X"}, {"id": "p", "name": ""}, None):
            with pytest.raises(LlmError) as caught:
                llm.register_adapter(["a", "p"], Renamer(info))
            assert caught.value.code == "INVALID_ADAPTER"
            assert str(caught.value) == (
                'adapter metadata for provider "a" must preserve its id and have a non-empty name'
            )
            assert llm.provider_info("a") is None  # all-or-nothing
        llm.register_adapter("p", Renamer({"id": "p", "name": "Pretty"}))
        assert llm.provider_info("p") == {"id": "p", "name": "Pretty"}


async def test_duplicates_are_refused_all_or_nothing() -> None:
    async with Context() as root:
        llm = await mount(root)
        first = Adapter()
        llm.register_adapter("a", first)
        for providers in (["b", "a"], ["b", "b"]):
            duplicate = providers[-1]
            with pytest.raises(LlmError) as caught:
                llm.register_adapter(providers, Adapter())
            assert (str(caught.value), caught.value.code) == (
                f'an adapter for provider "{duplicate}" is already registered',
                "DUPLICATE_ADAPTER",
            )
            assert llm.provider_info("b") is None
        assert llm.provider_info("a") == {"id": "a", "name": "a"}


async def test_handle_disposes_and_replaces_routes() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()
        handle = llm.register_adapter(["a", "b"], adapter)
        llm.register_adapter("c", Adapter())
        handle.replace(["b", "d"])
        assert handle.providers == ("b", "d")
        assert llm.provider_info("a") is None
        assert llm.provider_info("d") == {"id": "d", "name": "d"}
        with pytest.raises(LlmError, match='"c" is already registered'):
            handle.replace(["c"])
        assert handle.providers == ("b", "d")  # unchanged by the failed replace
        handle()
        assert llm.provider_info("b") is None
        assert llm.provider_info("d") is None
        handle()  # idempotent
        assert llm.provider_info("c") is not None
        with pytest.raises(RuntimeError):
            handle.replace(["e"])
        llm.register_adapter("b", Adapter())  # the name is free again


async def test_adapter_registered_by_a_plugin_disappears_with_it() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Adapter()

        def provider_plugin(ctx: Context, config: Any) -> None:
            ctx.llm.register_adapter("p", adapter)

        fiber = root.plugin(provider_plugin, inject=("llm",))
        await fiber
        assert fiber.state is FiberState.ACTIVE
        assert await collect(llm.stream(options())) == TEXT
        await fiber.dispose()
        assert llm.provider_info("p") is None
        got = await collect(llm.stream(options()))
        assert got[0]["reason"]["failure"]["code"] == "NO_ADAPTER"


# -- prepare_call ------------------------------------------------------------------------------


class Modelled(Adapter):
    def __init__(self, info: ModelInfo) -> None:
        super().__init__()
        self.info = info
        self.resolved: list[tuple[str, str, Any]] = []

    async def resolve_model(self, provider: str, model: str, signal: Any) -> ModelInfo:
        self.resolved.append((provider, model, signal))
        return self.info

    def provider_retry_policy(self, provider: str) -> RetryPolicy | None:
        return RetryPolicy(max_retries=2) if provider == "custom" else None


async def test_prepare_call_fills_and_flags_defaults() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Modelled(
            ModelInfo(context_window=1000, default_max_tokens=256, default_reasoning_effort="high")
        )
        llm.register_adapter(["p", "custom"], adapter)
        signal = AbortController().signal
        prepared = await llm.prepare_call({"provider": "p", "model": "m"}, signal)
        assert adapter.resolved == [("p", "m", signal)]
        assert list(prepared.config.items()) == [
            ("provider", "p"),
            ("model", "m"),
            ("maxTokens", 256),
            ("reasoningEffort", "high"),
        ]
        assert list(prepared.adapter_defaults or {}) == ["reasoningEffort", "maxTokens"]
        assert prepared.context == {"provider": "p", "model": "m", "contextWindow": 1000}
        assert prepared.retry_policy == RetryPolicy()
        explicit = await llm.prepare_call(
            {"provider": "custom", "model": "m", "maxTokens": 7, "reasoningEffort": "low"}
        )
        assert explicit.adapter_defaults is None
        assert explicit.config["maxTokens"] == 7
        assert explicit.retry_policy == RetryPolicy(max_retries=2)


async def test_prepare_call_without_adapter_or_model_info() -> None:
    async with Context() as root:
        llm = await mount(root)
        with pytest.raises(LlmError) as caught:
            await llm.prepare_call({"provider": "nope", "model": "m"})
        assert (str(caught.value), caught.value.code) == (
            'no adapter registered for provider "nope"',
            "NO_ADAPTER",
        )
        llm.register_adapter("p", Adapter())
        prepared = await llm.prepare_call({"provider": "p", "model": "m"})
        assert prepared.config == {"provider": "p", "model": "m"}
        assert prepared.adapter_defaults is None
        assert prepared.context == {"provider": "p", "model": "m"}


async def test_prepared_stream_is_single_use_and_skips_resolution() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Modelled(ModelInfo(default_max_tokens=256))
        llm.register_adapter("p", adapter)
        seen: list[GenerateOptions] = []

        def spy(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
            seen.append(opts)
            return next()

        root.on("llm/stream", spy)
        prepared = await llm.prepare_call({"provider": "p", "model": "m"})
        request = options(max_tokens=prepared.config["maxTokens"])
        assert await collect(prepared.stream(request)) == TEXT
        assert seen == [request]  # the waterfall runs for prepared calls too
        assert len(adapter.resolved) == 1
        with pytest.raises(RuntimeError, match="only once"):
            prepared.stream(request)


async def test_prepared_stream_after_route_removal_reports_no_adapter() -> None:
    async with Context() as root:
        llm = await mount(root)
        handle = llm.register_adapter("p", Adapter())
        prepared = await llm.prepare_call({"provider": "p", "model": "m"})
        handle()
        got = await collect(prepared.stream(options()))
        assert got[0]["reason"]["failure"]["code"] == "NO_ADAPTER"


async def test_close_stream_closes_an_unfinished_generator_and_skips_a_finished_one() -> None:
    closed: list[str] = []

    async def stream_of() -> AsyncIterator[StreamChunk]:
        try:
            yield {"type": "usage", "usage": {}}
            yield {"type": "usage", "usage": {}}
        finally:
            closed.append("cleanup")

    unfinished = stream_of()
    await anext(unfinished)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await close_stream(unfinished)  # shielded: the cleanup runs despite the cancel
    assert closed == ["cleanup"]
    assert unfinished.ag_frame is None

    finished = stream_of()
    assert len([chunk async for chunk in finished]) == 2
    assert closed == ["cleanup", "cleanup"]
    await close_stream(finished)
    assert closed == ["cleanup", "cleanup"]

    class Iterable:
        def __init__(self) -> None:
            self.closes = 0

        async def aclose(self) -> None:
            await checkpoint()
            self.closes += 1

    other = Iterable()
    await close_stream(other)  # type: ignore[arg-type]
    assert other.closes == 1


class Ending(Adapter):
    """An adapter that says its stream returns right after its finish chunk; records how it
    ended (returned after the finish, or closed at it)."""

    ends_at_finish = True

    def __init__(self, script: list[StreamChunk] | None = None) -> None:
        super().__init__(script)
        self.ended: list[str] = []

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        try:
            for chunk in self.script:
                yield chunk
            self.ended.append("returned")
        except GeneratorExit:
            self.ended.append("closed")
            raise


async def test_a_stream_that_ends_at_its_finish_returns_instead_of_being_closed() -> None:
    """No close (and no shielded scope) for a stream that declares it ends at its finish; one
    without the declaration is closed there (docs/models.md)."""
    async with Context() as root:
        llm = await mount(root)
        ending = Ending()
        plain = Ending()
        plain.ends_at_finish = False
        llm.register_adapter("p", ending)
        llm.register_adapter("q", plain)
        assert await collect(llm.stream(options())) == TEXT
        assert ending.ended == ["returned"]
        assert await collect(llm.stream(options("q"))) == TEXT
        assert plain.ended == ["closed"]


async def test_a_stream_that_breaks_its_end_at_finish_declaration_is_closed() -> None:
    async with Context() as root:
        llm = await mount(root)
        adapter = Ending([*TEXT, chunks.text_delta(0, "late"), chunks.text_delta(0, "later")])
        llm.register_adapter("p", adapter)
        assert await collect(llm.stream(options())) == TEXT
        assert adapter.ended == ["closed"]
