"""The replay adapter mounted behind the llm service (docs/models.md)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.llm
import plugins.llm_replay
from framework import AbortController, AbortSignal, Context, FiberState, boot
from plugins.llm import GenerateOptions, LlmService, StreamChunk, assemble
from plugins.llm_replay import ReplayAdapter, ReplayResponse

pytestmark = pytest.mark.anyio

SCRIPT = [
    {"text": "first"},
    {"tool_calls": [{"id": "c1", "name": "t", "arguments": {"a": 1}}], "reasoning": "why"},
    {"error": {"code": "SERVER", "message": "scripted outage"}},
]


def request(
    session_id: str | None = "s1", signal: AbortSignal | None = None, provider: str = "replay"
) -> GenerateOptions:
    messages = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    return GenerateOptions(
        provider=provider,
        model="any-model",
        messages=messages,
        session_id=session_id,
        signal=signal,
    )


async def collect(stream: Any) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def mount(root: Context, config: dict[str, Any]) -> LlmService:
    await root.plugin(plugins.llm)
    await root.plugin(plugins.llm_replay, config)
    llm: LlmService = root.llm
    return llm


async def test_serves_the_script_in_order_per_session() -> None:
    async with Context() as root:
        llm = await mount(root, {"responses": SCRIPT})
        first = await collect(llm.stream(request()))
        assert assemble(first).blocks == [{"type": "text", "text": "first"}]
        script = ReplayAdapter([ReplayResponse.model_validate(r) for r in SCRIPT]).script_id
        assert first[-1] == {
            "type": "finish",
            "reason": {"kind": "stop"},
            "replayState": {"script": script, "next": 1},
        }
        other_session = await collect(llm.stream(request("s2")))
        assert assemble(other_session).blocks == [{"type": "text", "text": "first"}]
        second = await collect(llm.stream(request()))
        assert assemble(second).finish == {"kind": "tool-calls"}
        assert assemble(second).blocks == [
            {"type": "reasoning", "text": "why"},
            {"type": "tool-call", "id": "c1", "name": "t", "arguments": '{"a":1}'},
        ]
        third = await collect(llm.stream(request()))
        assert third == [
            {
                "type": "finish",
                "reason": {
                    "kind": "error",
                    "failure": {"message": "scripted outage", "code": "SERVER"},
                },
            }
        ]
        exhausted = await collect(llm.stream(request()))
        assert exhausted == [
            {
                "type": "finish",
                "reason": {
                    "kind": "error",
                    "failure": {
                        "message": "replay script exhausted: request 4 but only 3 responses "
                        "are configured",
                        "code": "REPLAY_EXHAUSTED",
                    },
                },
            }
        ]


async def test_cursor_is_taken_at_first_iteration_only() -> None:
    async with Context() as root:
        llm = await mount(root, {"responses": SCRIPT})
        llm.stream(request())  # never iterated: consumes nothing
        vetoed = True

        def veto(opts: GenerateOptions, next: Callable[[], Any]) -> Any:
            if not vetoed:
                return next()

            async def nothing() -> AsyncIterator[StreamChunk]:
                yield {"type": "finish", "reason": {"kind": "stop"}}

            return nothing()

        root.on("llm/stream", veto)
        await collect(llm.stream(request()))
        vetoed = False
        got = await collect(llm.stream(request()))
        assert assemble(got).blocks == [{"type": "text", "text": "first"}]


async def test_providers_and_any_model_and_context_window() -> None:
    async with Context() as root:
        llm = await mount(root, {"provider": ["a", "b"], "responses": SCRIPT, "context_window": 99})
        assert llm.provider_info("a") == {"id": "a", "name": "a"}
        prepared = await llm.prepare_call({"provider": "b", "model": "whatever"})
        assert prepared.context == {"provider": "b", "model": "whatever", "contextWindow": 99}
        got = await collect(llm.stream(request(provider="b")))
        assert assemble(got).blocks == [{"type": "text", "text": "first"}]


async def test_no_responses_means_exhausted_at_once() -> None:
    async with Context() as root:
        llm = await mount(root, {})
        got = await collect(llm.stream(request()))
        assert got[0]["reason"]["failure"] == {
            "message": "replay script exhausted: request 1 but only 0 responses are configured",
            "code": "REPLAY_EXHAUSTED",
        }


async def test_abort_is_checked_before_each_chunk() -> None:
    async with Context() as root:
        llm = await mount(root, {"responses": [{"text": "abcdefghijklmnop"}], "chunk_size": 4})
        controller = AbortController()
        got: list[StreamChunk] = []
        async for chunk in llm.stream(request(signal=controller.signal)):
            got.append(chunk)
            if chunk["type"] == "text-delta":
                controller.abort()
        assert got == [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "abcd"},
            {
                "type": "finish",
                "reason": {
                    "kind": "aborted",
                    "failure": {"message": "replay aborted", "code": "ABORTED"},
                },
            },
        ]


async def test_delay_is_an_abortable_sleep() -> None:
    async with Context() as root:
        llm = await mount(root, {"responses": [{"text": "slow"}], "delay_ms": 60_000})
        controller = AbortController()
        got: list[StreamChunk] = []
        started = time.monotonic()
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                got.extend(await collect(llm.stream(request(signal=controller.signal))))

            tg.start_soon(consume)
            await anyio.sleep(0.02)
            controller.abort()
        assert time.monotonic() - started < 5
        assert got == [
            {
                "type": "finish",
                "reason": {
                    "kind": "aborted",
                    "failure": {"message": "replay aborted", "code": "ABORTED"},
                },
            }
        ]


async def test_small_delay_paces_chunks() -> None:
    async with Context() as root:
        llm = await mount(root, {"responses": [{"text": "ab"}], "delay_ms": 5})
        started = time.monotonic()
        got = await collect(llm.stream(request()))
        assert len(got) == 5
        assert time.monotonic() - started >= 0.025


async def test_script_file_absolute_and_cwd_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "script.yml"
    script.write_text("- text: from file\n")
    monkeypatch.chdir(tmp_path)
    for path in (str(script), "script.yml"):
        async with Context() as root:
            llm = await mount(root, {"file": path})
            got = await collect(llm.stream(request()))
            assert assemble(got).blocks == [{"type": "text", "text": "from file"}]


async def test_config_errors_are_clear(tmp_path: Path) -> None:
    async with Context() as root:
        await root.plugin(plugins.llm)
        both = root.plugin(plugins.llm_replay, {"responses": [], "file": "x.yml"})
        with pytest.raises(Exception) as caught:
            await both
        assert both.state is FiberState.FAILED
        assert "set either responses or file, not both" in str(caught.value)
        assert "Value error" not in str(caught.value)
        missing = root.plugin(plugins.llm_replay, {"file": str(tmp_path / "nope.yml")})
        with pytest.raises(Exception, match=r"cannot read replay file .*nope\.yml"):
            await missing
        bad_item = root.plugin(plugins.llm_replay, {"responses": [{"reasoning": "only"}]})
        with pytest.raises(Exception, match="a response needs one of text, tool_calls or error"):
            await bad_item


async def test_script_file_is_relative_to_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = tmp_path / "deploy"
    deployment.mkdir()
    (deployment / "script.yml").write_text("- text: next to the manifest\n")
    (deployment / "app.yml").write_text(
        "- {id: llm, name: dsh-llm}\n"
        "- {id: model, name: dsh-llm-replay, config: {file: script.yml}}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the cwd must not matter
    async with boot(deployment / "app.yml") as ctx:
        got = await collect(ctx.llm.stream(request()))
    assert assemble(got).blocks == [{"type": "text", "text": "next to the manifest"}]


@pytest.mark.parametrize("delay_ms", [0, 1])
async def test_the_stream_keeps_its_end_at_finish_declaration(delay_ms: float) -> None:
    """Resumed after its finish, the stream returns without awaiting (docs/models.md)."""
    adapter = ReplayAdapter(
        [ReplayResponse.model_validate(r) for r in SCRIPT[:2]], delay_ms=delay_ms
    )
    assert adapter.ends_at_finish
    for _ in range(2):
        stream = adapter.stream(request())
        async for chunk in stream:
            if chunk["type"] == "finish":
                break
        with anyio.CancelScope() as scope:
            scope.cancel()  # nothing it does after the finish may wait
            with pytest.raises(StopAsyncIteration):
                await anext(stream)
