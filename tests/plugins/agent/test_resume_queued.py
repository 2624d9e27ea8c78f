"""A prompt queued before a crash runs after the resume, first and exactly once
(docs/agent-loop.md, "Creating and resuming").

The crash is a copy of the stored log taken while a turn runs and a second prompt waits in
`next-turn` (both durable); a fresh stack over the copy resumes it. tests/e2e/test_hard_crash.py
does the same with a child process killed by SIGKILL.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_helpers import stack

from plugins.llm import chunks

pytestmark = pytest.mark.anyio


class HangingAdapter:
    """Answers nothing: every request waits until cancelled; `asked` is set on the first."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.asked.set()
        await anyio.sleep_forever()
        yield chunks.finish(chunks.stop_reason("stop"))  # pragma: no cover


def user_texts(events: Any) -> list[str]:
    return [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]


def pending_texts(messages: Any) -> list[str]:
    return [m["content"][0]["text"] for m in messages]


async def crashed_with_a_queued_prompt(live: Path, copy: Path, session_id: str = "q") -> None:
    """Run turn 1 on "first", queue "queued" while it waits for the model, flush, and copy the
    stored log to `copy`: what a crash at that moment leaves."""
    adapter = HangingAdapter()
    async with stack(root=live, replay={"provider": "other"}) as ctx:
        ctx.llm.register_adapter("replay", adapter)
        handle = await ctx.agents.create(session_id)
        agent = handle.agent
        agent.followup("first")
        await adapter.asked.wait()
        agent.followup("queued")
        await ctx.sessions.flush(agent.session)
        shutil.copytree(live, copy)
        await handle.dispose()


async def test_a_prompt_queued_before_a_crash_runs_first_after_resume(tmp_path: Path) -> None:
    crashed = tmp_path / "crashed"
    await crashed_with_a_queued_prompt(tmp_path / "live", crashed)
    answers = [{"text": "answer to queued"}, {"text": "answer to new"}]
    async with stack(answers, root=crashed) as ctx:
        opened = await ctx.agents.open("q")
        assert opened.resumed
        assert pending_texts(opened.agent.inbox.next_turn) == ["queued"]
        result = await ctx.agents.run("new", session="q")
        events = opened.agent.session.events
        ends = [e["data"] for e in events if e["type"] == "turn/end"]
    # The interrupted turn keeps its prompt; the queued one runs (turn 2) before the new one.
    assert user_texts(events) == ["first", "queued", "new"]
    assert [(end["turn"], end["reason"]["kind"]) for end in ends] == [
        (1, "interrupted"),
        (2, "completed"),
        (3, "completed"),
    ]
    assert (result.turn, result.text) == (3, "answer to new")


async def test_a_rebuilt_prompt_runs_once_over_later_resumes(tmp_path: Path) -> None:
    crashed = tmp_path / "crashed"
    await crashed_with_a_queued_prompt(tmp_path / "live", crashed)
    async with stack([{"text": "a"}, {"text": "b"}], root=crashed) as ctx:
        await ctx.agents.run("second", session="q")
    async with stack([{"text": "c"}], root=crashed) as ctx:
        opened = await ctx.agents.open("q")
        assert opened.agent.inbox.next_turn == ()
        await ctx.agents.run("third", session="q")
        events = opened.agent.session.events
    assert user_texts(events) == ["first", "queued", "second", "third"]


async def test_a_prompt_its_turn_claimed_is_not_run_again(tmp_path: Path) -> None:
    # Only "first" was sent; its turn claimed it (the claim splice is durable) and crashed.
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    adapter = HangingAdapter()
    async with stack(root=live, replay={"provider": "other"}) as ctx:
        ctx.llm.register_adapter("replay", adapter)
        handle = await ctx.agents.create("q")
        handle.agent.followup("first")
        await adapter.asked.wait()
        await ctx.sessions.flush(handle.agent.session)
        shutil.copytree(live, crashed)
        await handle.dispose()
    async with stack([{"text": "ok"}], root=crashed) as ctx:
        opened = await ctx.agents.open("q")
        assert opened.agent.inbox.pending is False
        await ctx.agents.run("next", session="q")
        events = opened.agent.session.events
    assert user_texts(events) == ["first", "next"]


async def test_a_disposed_agent_discards_its_queue_for_good(tmp_path: Path) -> None:
    # A clean dispose cancels what waits (logged `outcome: "canceled"`): nothing comes back.
    adapter = HangingAdapter()
    async with stack(root=tmp_path, replay={"provider": "other"}) as ctx:
        ctx.llm.register_adapter("replay", adapter)
        handle = await ctx.agents.create("q")
        handle.agent.followup("first")
        await adapter.asked.wait()
        handle.agent.followup("queued")
        await handle.dispose()
    async with stack(root=tmp_path) as ctx:
        handle = await ctx.agents.resume("q")
        assert handle.agent.inbox.pending is False
        await handle.dispose()


async def test_a_fork_does_not_inherit_its_sources_queue_after_a_resume(tmp_path: Path) -> None:
    # The source's turn 1 ended with "queued" waiting; the fork's seed ends at that turn/end, so
    # the seed holds a pending prompt that is the source's, not the fork's, live or resumed.
    answers = [{"text": "one"}, {"text": "two"}]
    async with stack(answers, root=tmp_path) as ctx:
        handle = await ctx.agents.create("source")
        handle.agent.followup("first")
        handle.agent.followup("queued")
        await handle.agent.when_idle()
        events = handle.agent.session.events
        ended = [e["seq"] for e in events if e["type"] == "turn/end"]
        fork = ctx.sessions.fork("source", ended[0], id="fork")
        await ctx.sessions.flush(fork)
        ctx.sessions.dispose(fork)
        await handle.dispose()
    async with stack(root=tmp_path) as ctx:
        fork_handle = await ctx.agents.resume("fork")
        assert fork_handle.agent.session.header["seedLength"] == ended[0] + 1
        assert fork_handle.agent.inbox.pending is False
        await fork_handle.dispose()
