"""Resuming a stored session: repair, `source: "resume"`, turn numbers go on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_helpers import stack, types

from plugins.agent import AgentError, AgentOptions
from plugins.llm import chunks
from plugins.session_persistence.testing import FIXTURES

pytestmark = pytest.mark.anyio

FIXTURE = FIXTURES / "tool-outcome-unknown-resumed.jsonl"
ANSWER = (
    "I will verify the external state before deciding whether to retry the side-effecting "
    "operation."
)


class ScriptedAdapter:
    """Answers every request with one text block; records what it was sent."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(options)
        yield chunks.block_start(0, "text")
        yield chunks.text_delta(0, ANSWER)
        yield chunks.block_end(0, chunks.text_block(ANSWER))
        yield chunks.finish(chunks.stop_reason("stop"))


def normalised(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Times zeroed and message ids replaced by their order of appearance."""
    ids: dict[str, str] = {}
    out = []
    for event in events:
        event = json.loads(json.dumps(event))
        event["time"] = 0
        data = event["data"]
        messages = []
        if event["type"] == "user/message":
            messages = [data]
        elif event["type"] in ("assistant/message", "tool/result"):
            messages = [data["message"]]
        elif event["type"] == "agent/inbox/spliced":
            messages = data["inserted"]
        for message in messages:
            if not message["id"].startswith("interrupted-"):
                message["id"] = ids.setdefault(message["id"], f"id-{len(ids)}")
        out.append(event)
    return out


async def test_resume_repairs_and_continues_the_stored_conversation(tmp_path: Path) -> None:
    lines = FIXTURE.read_text().splitlines()
    header = json.loads(lines[0])
    fixture = [json.loads(line) for line in lines[1:]]
    adapter = ScriptedAdapter()
    options = AgentOptions(
        provider="deepseek-official",
        model="deepseek-v4-flash",
        system="You are a helpful assistant.",
    )
    starts: list[str] = []
    async with stack([], root=tmp_path) as ctx:
        location = ctx.sessionPersistence.locate(header)
        path = anyio.Path(location["path"] if isinstance(location, dict) else location.path)
        await path.parent.mkdir(parents=True, exist_ok=True)
        await path.write_text("\n".join(lines[:6]) + "\n")
        ctx.llm.register_adapter("deepseek-official", adapter)
        ctx.on("agent/session-start", lambda event: starts.append(event.source))
        handle = await ctx.agents.resume(header["id"], agent_options=options)
        agent = handle.agent
        assert starts == ["resume"]
        assert types(agent.session)[5:9] == [
            "tool/result",
            "step/end",
            "turn/end",
            "session/end-seed",
        ]
        agent.followup("Continue safely from the interrupted operation.")
        await agent.when_idle()
        await handle.dispose()

    (request,) = adapter.requests
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user", "user"]
    assert request.messages[2]["content"][0]["isError"] is True
    assert "Do not retry blindly." in request.messages[2]["content"][0]["content"][0]["text"]
    assert request.system == "You are a helpful assistant."
    assert request.session_id == header["id"]
    assert request.idempotency_key == f"{header['id']}:2:1"

    async with stack([], root=tmp_path) as ctx:
        loaded = (await ctx.sessionPersistence.load(header["id"])).events
    # The port writes no session/title: the fixture without seq 14, renumbered.
    expected = [e for e in fixture if e["type"] != "session/title"]
    for seq, event in enumerate(expected):
        event["seq"] = seq
    expected[20]["sourceEventSeqs"] = [16, 17, 18, 19]
    assert normalised(loaded) == normalised(expected)


async def test_a_resumed_agent_redeclares_its_header_and_numbers_turns_on(tmp_path: Path) -> None:
    meta = {"cwd": str(tmp_path)}
    async with stack([{"text": "one"}], root=tmp_path) as ctx:
        handle = await ctx.agents.create("again", meta=meta)
        handle.agent.followup("first")
        await handle.agent.when_idle()
        await handle.dispose()
    async with stack([{"text": "two"}], root=tmp_path) as ctx:
        handle = await ctx.agents.resume("again")
        agent = handle.agent
        before = len(agent.session.events)
        agent.followup("second")
        await agent.when_idle()
        new = agent.session.events[before:]
        assert [e["data"]["turn"] for e in new if e["type"] == "turn/start"] == [2]
        headers = [e["data"]["reason"] for e in new if e["type"] == "request/header"]
        assert headers == ["resume"]
        assert "request/context" not in [e["type"] for e in new]
        assert new[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}
        await handle.dispose()


async def test_resume_needs_a_persistence_backend() -> None:
    async with stack([]) as ctx:
        with pytest.raises(AgentError, match='cannot resume session "x": no sessionPersistence'):
            await ctx.agents.resume("x")


async def test_a_resumed_agent_keeps_an_explicit_reasoning_effort_of_the_same_route(
    tmp_path: Path,
) -> None:
    async def effort(payload: Any, next: Any) -> Any:
        return {**(await next()), "reasoningEffort": "high"}

    meta = {"cwd": str(tmp_path)}
    async with stack([{"text": "one"}], root=tmp_path) as ctx:
        handle = await ctx.agents.create(
            "effort", meta=meta, setup=lambda agent_ctx: agent_ctx.on("agent/request", effort)
        )
        handle.agent.followup("first")
        await handle.agent.when_idle()
        await handle.dispose()
    for model, expected in (("replay-1", "high"), ("other", None)):
        async with stack([{"text": "two"}], root=tmp_path) as ctx:
            options = AgentOptions(provider="replay", model=model)
            handle = await ctx.agents.resume("effort", agent_options=options)
            handle.agent.followup("again")
            await handle.agent.when_idle()
            header = [e for e in handle.agent.session.events if e["type"] == "request/header"][-1]
            assert header["data"]["reason"] == "resume"
            assert header["data"]["header"]["config"].get("reasoningEffort") == expected
            await handle.dispose()
