"""The driver, turn and step rules (docs/agent-loop.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from agent_helpers import call, stack, tool, types

from plugins.agent import AgentOptions, Reject, Retry
from plugins.llm import ModelInfo, chunks

pytestmark = pytest.mark.anyio


def ends(session: Any) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in session.events if e["type"] == "turn/end"]


def user_texts(session: Any) -> list[str]:
    return [e["data"]["content"][0]["text"] for e in session.events if e["type"] == "user/message"]


def hanging(reached: anyio.Event) -> Callable[..., AsyncIterator[Any]]:
    """An `llm/stream` listener whose stream never answers (until aborted)."""

    def listener(options: Any, next: Callable[[], Any]) -> AsyncIterator[Any]:
        async def stream() -> AsyncIterator[Any]:
            reached.set()
            await anyio.sleep_forever()
            yield {}  # pragma: no cover

        return stream()

    return listener


async def test_the_synchronous_prefix_is_logged_before_followup_returns() -> None:
    live: list[tuple[str, str, list[str]]] = []
    async with stack([{"text": "ok"}]) as ctx:
        for name in ("inserted", "claimed", "discarded"):
            ctx.on(
                f"agent/inbox/{name}",
                lambda event, name=name: live.append(
                    (name, event.target, [m["content"][0]["text"] for m in event.messages])
                ),
            )
        handle = await ctx.agents.create("prefix")
        agent = handle.agent
        assert agent.status == "idle"
        agent.followup("hello")
        assert agent.status == "running"
        assert types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced"]
        assert live == [("inserted", "next-turn", ["hello"]), ("claimed", "next-turn", ["hello"])]
        assert agent.session.events[1]["data"] == {"turn": 1}
        await agent.when_idle()
        assert agent.status == "idle"
        assert ends(agent.session) == [{"kind": "completed"}]
        await handle.dispose()
        assert agent.status == "disposed"
        with pytest.raises(RuntimeError, match='agent "prefix" is disposed'):
            agent.followup("late")


async def test_followups_while_running_become_the_next_turn() -> None:
    async with stack([{"text": "one"}, {"text": "two"}]) as ctx:
        handle = await ctx.agents.create("queue")
        agent = handle.agent
        agent.followup("first")
        agent.followup("second")
        await agent.when_idle()
        turns = [e["data"]["turn"] for e in agent.session.events if e["type"] == "turn/start"]
        assert turns == [1, 2]
        assert user_texts(agent.session) == ["first", "second"]
        assert ends(agent.session) == [{"kind": "completed"}] * 2
        await handle.dispose()


async def test_a_send_while_aborted_is_latched_into_a_new_turn() -> None:
    reached = anyio.Event()
    async with stack([{"text": "after"}]) as ctx:
        off = ctx.on("llm/stream", hanging(reached))
        handle = await ctx.agents.create("latch")
        agent = handle.agent
        agent.followup("stuck")
        await reached.wait()
        off()
        agent.cancel()
        agent.steer("again")  # while aborted: goes to next-turn, latched
        await agent.when_idle()
        assert ends(agent.session) == [
            {"kind": "aborted", "reason": {"kind": "user"}},
            {"kind": "completed"},
        ]
        assert user_texts(agent.session) == ["stuck", "again"]
        splices = [e["data"] for e in agent.session.events if e["type"] == "agent/inbox/spliced"]
        assert splices[2]["target"] == "next-turn"
        await handle.dispose()


async def test_cancel_keeping_the_inbox_goes_on_with_what_is_pending() -> None:
    reached = anyio.Event()
    async with stack([{"text": "a"}, {"text": "b"}, {"text": "c"}]) as ctx:
        off = ctx.on("llm/stream", hanging(reached))
        handle = await ctx.agents.create("keep")
        agent = handle.agent
        agent.followup("stuck")
        await reached.wait()
        off()
        agent.followup("queued")
        agent.inject("injected")
        agent.cancel({"kind": "hook", "reason": "test"}, keep_inbox=True)
        await agent.when_idle()
        assert ends(agent.session) == [
            {"kind": "aborted", "reason": {"kind": "hook", "reason": "test"}},
            {"kind": "completed"},
        ]
        # The next turn claims next-step items first, then the prompt.
        assert user_texts(agent.session) == ["stuck", "injected", "queued"]
        await handle.dispose()


async def test_after_an_error_pending_items_wait_for_a_wake() -> None:
    injected: list[int] = []

    async def inject_once(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        if not injected:
            injected.append(payload.step)
            payload.agent.inject("later")  # no wake: stays in next-step
        return await next()

    async with stack([{"error": {"code": "SERVER"}}, {"text": "ok"}]) as ctx:
        handle = await ctx.agents.create(
            "waits", setup=lambda agent_ctx: agent_ctx.on("agent/pre-step", inject_once)
        )
        agent = handle.agent
        agent.followup("go")
        await agent.when_idle()
        assert [r["kind"] for r in ends(agent.session)] == ["error"]
        assert [m["content"][0]["text"] for m in agent.inbox.next_step] == ["later"]
        agent.followup("again")
        await agent.when_idle()
        assert [r["kind"] for r in ends(agent.session)] == ["error", "completed"]
        assert user_texts(agent.session) == ["go", "later", "again"]
        await handle.dispose()


async def test_cancel_discards_pending_messages() -> None:
    reached = anyio.Event()
    async with stack([]) as ctx:
        ctx.on("llm/stream", hanging(reached))
        handle = await ctx.agents.create("discard")
        agent = handle.agent
        agent.followup("stuck")
        await reached.wait()
        agent.inject("pending step")
        agent.cancel()
        await agent.when_idle()
        canceled = [
            e["data"]
            for e in agent.session.events
            if e["type"] == "agent/inbox/spliced" and e["data"].get("outcome") == "canceled"
        ]
        assert canceled == [
            {
                "target": "next-step",
                "start": 0,
                "removedCount": 1,
                "inserted": [],
                "outcome": "canceled",
            }
        ]
        assert not agent.inbox.pending
        await handle.dispose()


async def test_steer_during_a_tool_step_reaches_the_next_step() -> None:
    holder: dict[str, Any] = {}

    async def body(args: Any, exec: Any) -> Any:
        holder["agent"].steer("steered")
        return "ok"

    async with stack([{"tool_calls": [call("c", "t")]}, {"text": "done"}]) as ctx:
        ctx.tools.register(tool("t", body))
        handle = await ctx.agents.create("steer")
        agent = holder["agent"] = handle.agent
        agent.followup("go")
        await agent.when_idle()
        assert user_texts(agent.session) == ["go", "steered"]
        step2 = next(
            e["seq"]
            for e in agent.session.events
            if e["type"] == "step/start" and e["data"]["step"] == 2
        )
        assert agent.session.events[step2 + 1]["type"] == "user/message"
        assert [e["data"]["turn"] for e in agent.session.events if e["type"] == "turn/start"] == [1]
        await handle.dispose()


async def test_turn_stopping_listeners_may_queue_another_step() -> None:
    async with stack([{"text": "one"}, {"text": "two"}]) as ctx:
        asked: list[int] = []

        async def stopping(payload: Any) -> None:
            asked.append(payload.turn)
            if len(asked) == 1:
                payload.agent.inject("one more step")

        handle = await ctx.agents.create(
            "stopping", setup=lambda agent_ctx: agent_ctx.on("agent/turn-stopping", stopping)
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        steps = [
            e["data"]["step"] for e in handle.agent.session.events if e["type"] == "step/start"
        ]
        assert steps == [1, 2]
        assert asked == [1, 1]
        assert user_texts(handle.agent.session) == ["go", "one more step"]
        await handle.dispose()


async def test_pre_step_reject_blocks_the_turn() -> None:
    async with stack([{"text": "never"}]) as ctx:

        async def reject(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            return Reject("no")

        handle = await ctx.agents.create(
            "blocked", setup=lambda agent_ctx: agent_ctx.on("agent/pre-step", reject)
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert types(handle.agent.session) == [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
            "turn/end",
        ]
        assert ends(handle.agent.session) == [{"kind": "blocked"}]
        await handle.dispose()


async def test_request_errors_fail_the_turn_unless_a_listener_retries() -> None:
    errors: list[Any] = []
    script = [{"error": {"code": "SERVER", "message": "overloaded"}}, {"text": "recovered"}]
    async with stack(script * 2) as ctx:
        ctx.on("agent/error", lambda event: errors.append(event.error))
        handle = await ctx.agents.create("fails")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert ends(handle.agent.session) == [
            {"kind": "error", "error": {"message": "overloaded", "code": "SERVER"}}
        ]
        assert [getattr(e, "code", None) for e in errors] == ["SERVER"]
        await handle.dispose()

        retried: list[Any] = []

        async def retry(payload: Any) -> Any:
            retried.append((payload.turn, payload.step, payload.provider, payload.failure))
            return Retry()

        handle = await ctx.agents.create(
            "retries", setup=lambda agent_ctx: agent_ctx.on("agent/request-error", retry)
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        session = handle.agent.session
        assert retried == [(1, 1, "replay", {"message": "overloaded", "code": "SERVER"})]
        assert ends(session) == [{"kind": "completed"}]
        assert [e["data"]["step"] for e in session.events if e["type"] == "step/start"] == [1]
        assert types(session).count("assistant/message") == 1
        message = next(e for e in session.events if e["type"] == "assistant/message")
        # Only the successful attempt's chunks are the message's sources.
        assert (
            session.events[message["sourceEventSeqs"][0] - 1]["data"]["chunk"]["type"] == "finish"
        )
        await handle.dispose()


class MaxTokensAdapter:
    """Answers with text and a tool call, cut off at max tokens."""

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        yield chunks.block_start(0, "text")
        yield chunks.text_delta(0, "partial")
        yield chunks.block_start(1, "tool-call")
        yield chunks.tool_call_delta(1, "cut", '{"a"', name="t")
        yield chunks.finish(chunks.stop_reason("max-tokens"))


async def test_max_tokens_drops_tool_calls_and_ends_the_turn() -> None:
    async with stack([]) as ctx:
        ctx.llm.register_adapter("limited", MaxTokensAdapter())
        handle = await ctx.agents.create(
            "max", agent_options=AgentOptions(provider="limited", model="m", max_tokens=5)
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        session = handle.agent.session
        assert "tool/call" not in types(session)
        message = next(e for e in session.events if e["type"] == "assistant/message")
        assert message["data"]["message"]["content"] == [{"type": "text", "text": "partial"}]
        assert ends(session) == [{"kind": "max-tokens"}]
        header = next(e for e in session.events if e["type"] == "request/header")
        assert header["data"]["header"]["config"] == {
            "provider": "limited",
            "model": "m",
            "maxTokens": 5,
        }
        await handle.dispose()


async def test_no_route_fails_the_turn_with_the_exact_text() -> None:
    async with stack([{"text": "routed"}]) as ctx:
        handle = await ctx.agents.create("unrouted", agent_options=AgentOptions())
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert ends(handle.agent.session) == [
            {
                "kind": "error",
                "error": {
                    "message": 'agent "unrouted" has no provider/model: set AgentOptions.provider '
                    "and AgentOptions.model or supply both via the agent/request waterfall",
                    "code": "UNKNOWN",
                },
            }
        ]
        assert "step/end" in types(handle.agent.session)
        await handle.dispose()

        async def route(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
            config = await next()
            return {**config, "provider": "replay", "model": "from-hook"}

        handle = await ctx.agents.create(
            "routed",
            agent_options=AgentOptions(),
            setup=lambda agent_ctx: agent_ctx.on("agent/request", route),
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert ends(handle.agent.session) == [{"kind": "completed"}]
        header = next(e for e in handle.agent.session.events if e["type"] == "request/header")
        assert header["data"]["header"]["config"] == {"provider": "replay", "model": "from-hook"}
        await handle.dispose()


async def test_headers_are_written_initially_and_on_change_only() -> None:
    model = {"name": "m1"}

    async def route(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        config = await next()
        return {**config, "model": model["name"]}

    async with stack([{"text": "a"}, {"text": "b"}, {"text": "c"}]) as ctx:
        handle = await ctx.agents.create(
            "headers",
            agent_options=AgentOptions(provider="replay", model="m0", system="be brief"),
            setup=lambda agent_ctx: agent_ctx.on("agent/request", route),
        )
        agent = handle.agent
        agent.followup("1")
        await agent.when_idle()
        agent.followup("2")
        await agent.when_idle()
        model["name"] = "m2"
        agent.followup("3")
        await agent.when_idle()
        headers = [e["data"] for e in agent.session.events if e["type"] == "request/header"]
        assert headers == [
            {
                "header": {
                    "config": {"provider": "replay", "model": "m1"},
                    "system": "be brief",
                    "tools": [],
                },
                "reason": "initial",
            },
            {
                "header": {
                    "config": {"provider": "replay", "model": "m2"},
                    "system": "be brief",
                    "tools": [],
                },
                "reason": "change",
            },
        ]
        contexts = [e["data"] for e in agent.session.events if e["type"] == "request/context"]
        assert contexts == [
            {"provider": "replay", "model": "m1", "contextWindow": 128000},
            {"provider": "replay", "model": "m2", "contextWindow": 128000},
        ]
        await handle.dispose()


async def test_a_missing_adapter_is_recorded_then_fails_the_turn() -> None:
    async with stack([]) as ctx:
        handle = await ctx.agents.create(
            "no-adapter", agent_options=AgentOptions(provider="nowhere", model="m")
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        session = handle.agent.session
        assert "request/header" in types(session)
        assert ends(session) == [
            {
                "kind": "error",
                "error": {
                    "message": 'no adapter registered for provider "nowhere"',
                    "code": "NO_ADAPTER",
                },
            }
        ]
        await handle.dispose()


async def test_abort_mid_stream_keeps_an_interrupted_message() -> None:
    async with stack(
        [{"text": "a long answer that streams slowly"}], replay={"delay_ms": 5, "chunk_size": 4}
    ) as ctx:
        handle = await ctx.agents.create("interrupt")
        agent = handle.agent
        seen: list[str] = []

        def on_event(session: Any, event: Any) -> None:
            if (
                event["type"] == "assistant/chunk"
                and event["data"]["chunk"]["type"] == "text-delta"
            ):
                seen.append(event["data"]["chunk"]["text"])
                if len(seen) == 2:
                    agent.cancel()

        ctx.on("session/event", on_event)
        agent.followup("go")
        await agent.when_idle()
        message = next(e for e in agent.session.events if e["type"] == "assistant/message")
        assert message["data"]["interrupted"] is True
        assert message["data"]["message"]["content"] == [{"type": "text", "text": "".join(seen)}]
        chunk_seqs = [e["seq"] for e in agent.session.events if e["type"] == "assistant/chunk"]
        assert message["sourceEventSeqs"] == chunk_seqs
        assert types(agent.session)[-2:] == ["step/end", "turn/end"]
        assert ends(agent.session) == [{"kind": "aborted", "reason": {"kind": "user"}}]
        await handle.dispose()


class EndsAtFinish:
    """Declares `ends_at_finish` (docs/models.md) and records how its stream ended."""

    ends_at_finish = True

    def __init__(self) -> None:
        self.ended: list[str] = []

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            yield chunks.block_start(0, "text")
            yield chunks.text_delta(0, "done")
            yield chunks.block_end(0, chunks.text_block("done"))
            yield chunks.finish(chunks.stop_reason("stop"))
            self.ended.append("returned")
        except GeneratorExit:
            self.ended.append("closed")
            raise


async def test_an_abort_at_the_finish_of_a_stream_that_ends_there() -> None:
    """The stream is finished rather than closed, and the turn ends aborted with the answer
    kept as an interrupted message, as when the stream is closed."""
    adapter = EndsAtFinish()
    async with stack([]) as ctx:
        ctx.llm.register_adapter("ending", adapter)
        handle = await ctx.agents.create(
            "ending", agent_options=AgentOptions(provider="ending", model="m")
        )
        agent = handle.agent

        def on_event(session: Any, event: Any) -> None:
            if event["type"] == "assistant/chunk" and event["data"]["chunk"]["type"] == "finish":
                agent.cancel()

        ctx.on("session/event", on_event)
        agent.followup("go")
        await agent.when_idle()
        assert adapter.ended == ["returned"]
        message = next(e for e in agent.session.events if e["type"] == "assistant/message")
        assert message["data"]["interrupted"] is True
        assert message["data"]["message"]["content"] == [{"type": "text", "text": "done"}]
        assert types(agent.session)[-2:] == ["step/end", "turn/end"]
        assert ends(agent.session) == [{"kind": "aborted", "reason": {"kind": "user"}}]
        await handle.dispose()


async def test_a_failing_idle_checkpoint_is_reported_and_the_agent_still_idles() -> None:
    errors: list[str] = []
    flushed: list[str] = []

    def broken(session: Any) -> None:
        flushed.append(session.events[-1]["type"])
        raise OSError("disk unavailable")

    async with stack([{"text": "ok"}, {"text": "ok"}]) as ctx:
        ctx.on("session/flush", broken)
        ctx.on("agent/error", lambda event: errors.append(str(event.error)))
        handle = await ctx.agents.create("flaky")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert flushed == ["turn/end"]
        assert errors == ["disk unavailable"]
        assert handle.agent.status == "idle"
        await handle.dispose()


class DefaultsAdapter:
    """A route whose model fills `maxTokens` and `reasoningEffort` by default."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def resolve_model(self, provider: str, model: str, signal: Any) -> ModelInfo:
        return ModelInfo(
            context_window=1000, default_max_tokens=64, default_reasoning_effort="medium"
        )

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(options)
        yield chunks.block_start(0, "text")
        yield chunks.text_delta(0, "ok")
        yield chunks.finish(chunks.stop_reason("stop"))


async def test_adapter_defaults_are_flagged_and_not_carried_as_explicit_config() -> None:
    adapter = DefaultsAdapter()
    async with stack([]) as ctx:
        ctx.llm.register_adapter("defaults", adapter)
        handle = await ctx.agents.create(
            "defaults", agent_options=AgentOptions(provider="defaults", model="m")
        )
        agent = handle.agent
        for text in ("one", "two"):
            agent.followup(text)
            await agent.when_idle()
        headers = [e["data"] for e in agent.session.events if e["type"] == "request/header"]
        assert headers == [
            {
                "header": {
                    "config": {
                        "provider": "defaults",
                        "model": "m",
                        "maxTokens": 64,
                        "reasoningEffort": "medium",
                    },
                    "adapterDefaults": {"reasoningEffort": True, "maxTokens": True},
                    "tools": [],
                },
                "reason": "initial",
            }
        ]
        assert [(r.max_tokens, r.reasoning_effort) for r in adapter.requests] == [
            (64, "medium"),
            (64, "medium"),
        ]
        await handle.dispose()


async def test_cancel_causes_must_be_json_cause_objects() -> None:
    async with stack([]) as ctx:
        handle = await ctx.agents.create("causes")
        with pytest.raises(TypeError, match="a cancel cause must be"):
            handle.agent.cancel({"reason": "no kind"})
        with pytest.raises(TypeError):
            handle.agent.cancel({"kind": "hook", "reason": object()})
        await handle.dispose()


async def test_an_agent_request_listener_must_return_a_config() -> None:
    async def broken(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        await next()
        return None

    async with stack([{"text": "never"}]) as ctx:
        handle = await ctx.agents.create(
            "bad-config", setup=lambda agent_ctx: agent_ctx.on("agent/request", broken)
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert ends(handle.agent.session) == [
            {
                "kind": "error",
                "error": {
                    "message": "agent/request must return a call config dict, got NoneType",
                    "code": "UNKNOWN",
                },
            }
        ]
        await handle.dispose()
