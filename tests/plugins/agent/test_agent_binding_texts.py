"""Exact spec texts of the agent runtime (docs/agent-loop.md) other tests match only by fragment."""

from __future__ import annotations

from typing import Any

import pytest
from agent_helpers import stack

from plugins.agent import AgentError
from plugins.agent.inbox import Inbox

pytestmark = pytest.mark.anyio


async def test_duplicate_agent_id_text_is_exact() -> None:
    async with stack([]) as ctx:
        handle = await ctx.agents.create("dup")
        ctx.sessions.dispose(handle.agent.session)  # the agent outlives its session's entry
        with pytest.raises(AgentError) as caught:
            await ctx.agents.create("dup")
        assert str(caught.value) == 'agent "dup" is already registered'
        await handle.dispose()


def test_pending_message_id_text_is_exact() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    inbox = Inbox(lambda kind, data: events.append((kind, data)), lambda *args: None)
    message = {"id": "m-1", "role": "user", "source": {"kind": "user"}, "content": []}
    inbox.insert("next-turn", message)
    with pytest.raises(ValueError) as caught:
        inbox.insert("next-step", dict(message))
    assert str(caught.value) == 'message "m-1" is already pending'
    assert len(events) == 1  # the refused insert appended nothing
