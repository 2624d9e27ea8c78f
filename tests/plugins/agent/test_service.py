"""The `agents` service: create/dispose lifecycle, rollback, defaults, ownership."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from agent_helpers import stack, types

import plugins.agent
from framework import AbortController
from framework.loader import boot
from plugins.agent import AgentError, AgentOptions

pytestmark = pytest.mark.anyio


async def test_create_publishes_session_then_agent_then_session_start() -> None:
    order: list[str] = []
    async with stack([]) as ctx:
        ctx.on("session/created", lambda session: order.append(f"session/created {session.id}"))
        ctx.on("agent/created", lambda agent: order.append(f"agent/created {agent.id}"))
        ctx.on(
            "agent/session-start",
            lambda event: order.append(f"agent/session-start {event.agent.id} {event.source}"),
        )

        def setup(agent_ctx: Any) -> None:
            order.append("setup")
            assert ctx.sessions.get("pub") is None  # nothing is published before setup returns

        handle = await ctx.agents.create("pub", setup=setup)
        assert order == [
            "setup",
            "session/created pub",
            "agent/created pub",
            "agent/session-start pub startup",
        ]
        agent = handle.agent
        assert agent.id == "pub"
        assert ctx.sessions.get("pub") is agent.session
        assert ctx.agents.get("pub") is agent
        assert ctx.agents.list() == [agent]
        assert agent.session.events == []  # an unseeded session gets no events
        await handle.dispose()


async def test_a_failing_setup_rolls_everything_back() -> None:
    calls: list[str] = []
    async with stack([{"text": "ok"}]) as ctx:

        async def setup(agent_ctx: Any) -> None:
            agent_ctx.on("agent/pre-step", lambda payload, next: calls.append("leaked"))
            raise RuntimeError("setup broke")

        with pytest.raises(RuntimeError, match="setup broke"):
            await ctx.agents.create("rollback", setup=setup)
        assert ctx.sessions.get("rollback") is None
        assert ctx.agents.get("rollback") is None
        handle = await ctx.agents.create("rollback")  # the id is free again
        handle.agent.followup("go")
        await handle.agent.when_idle()
        assert calls == []
        await handle.dispose()


async def test_duplicate_ids_are_refused() -> None:
    async with stack([]) as ctx:
        handle = await ctx.agents.create("dup")
        with pytest.raises(RuntimeError, match='session "dup" already exists'):
            await ctx.agents.create("dup")
        ctx.sessions.dispose(handle.agent.session)  # the agent outlives its session's entry
        with pytest.raises(AgentError, match='agent "dup" is already registered'):
            await ctx.agents.create("dup")
        assert ctx.sessions.get("dup") is None
        await handle.dispose()


async def test_dispose_cancels_waits_unwinds_and_detaches() -> None:
    reached = anyio.Event()
    seen: list[str] = []

    def hang(options: Any, next: Any) -> Any:
        async def stream() -> Any:
            reached.set()
            await anyio.sleep_forever()
            yield {}  # pragma: no cover

        return stream()

    async with stack([]) as ctx:
        ctx.on("llm/stream", hang)
        ctx.on("agent/disposed", lambda agent: seen.append(f"disposed {agent.status}"))
        ctx.on("session/disposed", lambda session: seen.append(f"session/disposed {session.id}"))
        handle = await ctx.agents.create(
            "bye", setup=lambda agent_ctx: agent_ctx.on("agent/status", lambda a: seen.append("s"))
        )
        agent = handle.agent
        agent.followup("go")
        await reached.wait()
        await handle.dispose()
        assert agent.status == "disposed"
        assert agent.session.events[-1]["data"] == {
            "turn": 1,
            "reason": {"kind": "aborted", "reason": {"kind": "disposed"}},
        }
        assert seen == ["s", "s", "session/disposed bye", "disposed disposed"]
        assert ctx.agents.get("bye") is None
        await handle.dispose()  # idempotent
        assert seen.count("disposed disposed") == 1


async def test_a_send_while_disposing_is_not_latched() -> None:
    reached = anyio.Event()

    def hang(options: Any, next: Any) -> Any:
        async def stream() -> Any:
            reached.set()
            await anyio.sleep_forever()
            yield {}  # pragma: no cover

        return stream()

    async with stack([{"text": "never"}]) as ctx:
        ctx.on("llm/stream", hang)
        handle = await ctx.agents.create("no-latch")
        agent = handle.agent
        agent.followup("go")
        await reached.wait()
        agent.cancel({"kind": "disposed"})
        agent.followup("after")
        await agent.when_idle()
        assert [e["data"]["turn"] for e in agent.session.events if e["type"] == "turn/start"] == [1]
        assert [m["content"][0]["text"] for m in agent.inbox.next_turn] == ["after"]
        await handle.dispose()


async def test_the_parent_signal_cancels_with_cause_parent() -> None:
    reached = anyio.Event()

    def hang(options: Any, next: Any) -> Any:
        async def stream() -> Any:
            reached.set()
            await anyio.sleep_forever()
            yield {}  # pragma: no cover

        return stream()

    parent = AbortController()
    async with stack([]) as ctx:
        ctx.on("llm/stream", hang)
        handle = await ctx.agents.create("child", signal=parent.signal)
        handle.agent.followup("go")
        await reached.wait()
        parent.abort()
        await handle.agent.when_idle()
        assert handle.agent.session.events[-1]["data"]["reason"] == {
            "kind": "aborted",
            "reason": {"kind": "parent"},
        }
        await handle.dispose()


async def test_disposing_the_owner_or_the_service_disposes_its_agents() -> None:
    async with stack([]) as ctx:
        handles: list[Any] = []

        async def owner(owner_ctx: Any, config: Any) -> None:
            handles.append(await owner_ctx.agents.create("owned"))

        fiber = ctx.plugin(owner, inject=["agents"])
        await fiber
        agent = handles[0].agent
        await fiber.dispose()
        assert agent.status == "disposed"
        assert ctx.sessions.get("owned") is None

        reached = anyio.Event()

        def hang(options: Any, next: Any) -> Any:
            async def stream() -> Any:
                reached.set()
                await anyio.sleep_forever()
                yield {}  # pragma: no cover

            return stream()

        ctx.on("llm/stream", hang)
        detached: list[str] = []
        ctx.on("session/disposed", lambda session: detached.append(session.events[-1]["type"]))
        other = await ctx.agents.create("service-owned")
        other.agent.followup("busy")
        await reached.wait()
        service_fiber = ctx.get("agents").ctx.fiber
        await service_fiber.dispose()
        assert other.agent.status == "disposed"
        assert ctx.sessions.get("service-owned") is None
        assert detached == ["turn/end"]  # the driver stopped before the session was detached
        assert other.agent.session.events[-1]["data"]["reason"] == {
            "kind": "aborted",
            "reason": {"kind": "disposed"},
        }


async def test_default_options_come_from_config_and_presets() -> None:
    config = {
        "system": "be kind",
        "max_tokens": 100,
        "agents": {"coder": {"model": "code-1", "system": "write code"}},
    }
    async with stack([{"text": "ok"}], agent=config) as ctx:
        assert ctx.agents.default_options() == AgentOptions("replay", "replay-1", 100, "be kind")
        assert ctx.agents.default_options("coder") == AgentOptions(
            "replay", "code-1", 100, "write code"
        )
        with pytest.raises(AgentError, match='unknown agent preset "nope"'):
            ctx.agents.default_options("nope")
        handle = await ctx.agents.create("defaults")
        assert handle.agent.options == AgentOptions("replay", "replay-1", 100, "be kind")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        header = next(e for e in handle.agent.session.events if e["type"] == "request/header")
        assert header["data"]["header"]["config"]["maxTokens"] == 100
        assert header["data"]["header"]["system"] == "be kind"
        await handle.dispose()


async def test_config_is_validated() -> None:
    async with stack([]) as ctx:
        fiber = ctx.plugin(plugins.agent, {"max_parallel_tool_calls": 0, "bogus": 1})
        with pytest.raises(Exception, match="invalid config") as info:
            await fiber
        assert "bogus" in str(info.value)


async def test_splices_inside_a_seed_do_not_fill_the_inbox() -> None:
    pending = {
        "target": "next-turn",
        "start": 0,
        "inserted": [
            {"content": [], "source": {"kind": "user"}, "role": "user", "id": "seeded-prompt"}
        ],
    }
    seed = [{"type": "agent/inbox/spliced", "seq": 0, "time": 0, "data": pending}]
    async with stack([{"text": "ok"}]) as ctx:
        handle = await ctx.agents.create("seeded", seed=seed)
        assert types(handle.agent.session) == ["agent/inbox/spliced", "session/end-seed"]
        assert not handle.agent.inbox.pending
        await handle.dispose()


async def test_the_entry_point_boots_from_a_manifest(tmp_path: Any) -> None:
    manifest = tmp_path / "app.yml"
    manifest.write_text(
        "- name: dsh-session\n"
        "- name: dsh-llm\n"
        "- name: dsh-tools\n"
        "- name: dsh-llm-replay\n"
        "  config: {responses: [{text: booted}]}\n"
        "- name: dsh-agent\n"
        "  config: {provider: replay, model: replay, system: hello, max_parallel_tool_calls: 3}\n"
    )
    async with boot(manifest) as ctx:
        assert ctx.agents.config.max_parallel_tool_calls == 3
        handle = await ctx.agents.create("booted")
        handle.agent.followup("hi")
        await handle.agent.when_idle()
        message = next(e for e in handle.agent.session.events if e["type"] == "assistant/message")
        assert message["data"]["message"]["content"] == [{"type": "text", "text": "booted"}]
        await handle.dispose()


async def test_a_vetoed_session_rolls_the_agent_back() -> None:
    created: list[str] = []
    async with stack([]) as ctx:

        def veto(session: Any) -> None:
            raise RuntimeError(f"no session {session.id}")

        off = ctx.on("session/created", veto)
        ctx.on("agent/created", lambda agent: created.append(agent.id))
        with pytest.raises(RuntimeError, match="no session vetoed"):
            await ctx.agents.create("vetoed")
        off()
        assert ctx.sessions.get("vetoed") is None
        assert ctx.agents.get("vetoed") is None
        assert created == []
        handle = await ctx.agents.create("vetoed")
        assert created == ["vetoed"]
        await handle.dispose()
