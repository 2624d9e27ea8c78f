"""The step logs what the model adapter yields as checked copies, and builds the assistant
message from those copies (docs/performance.md, "Owned appends in the agent loop")."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_helpers import stack

from plugins.agent import AgentOptions
from plugins.llm import chunks

pytestmark = pytest.mark.anyio


class MutatingAdapter:
    """Yields a text block, usage and a finish, changing each chunk once the step has read it
    (the stream closes after the finish: what it carries cannot change)."""

    def __init__(self) -> None:
        self.yielded: list[dict[str, Any]] = []

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        script = [
            chunks.block_start(0, "text"),
            chunks.text_delta(0, "hello"),
            chunks.block_end(0, chunks.text_block("hello")),
            chunks.usage({"inputTokens": 3, "outputTokens": 2}),
            chunks.finish(chunks.stop_reason("stop"), {"cursor": [1]}),
        ]
        self.yielded = copy.deepcopy(script)
        for chunk in script:
            yield chunk
            chunk["index"] = 7
            if "block" in chunk:
                chunk["block"]["text"] = "changed"
            if "usage" in chunk:
                chunk["usage"]["inputTokens"] = 99


class ForeignValueAdapter:
    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"type": "text-delta", "index": 0, "text": ("not", "json")}


async def test_what_the_adapter_changes_after_yielding_stays_out_of_the_log() -> None:
    adapter = MutatingAdapter()
    async with stack([]) as ctx:
        ctx.llm.register_adapter("mutating", adapter)
        handle = await ctx.agents.create(
            "m", agent_options=AgentOptions(provider="mutating", model="m")
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        events = handle.agent.session.events
        logged = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
        assert logged == adapter.yielded
        message = next(e for e in events if e["type"] == "assistant/message")["data"]
        assert message["message"]["content"] == [{"type": "text", "text": "hello"}]
        assert message["message"]["source"]["replayState"] == {"cursor": [1]}
        assert message["message"]["content"][0] is logged[2]["block"]  # the logged copy
        assert message["usage"] == {"inputTokens": 3, "outputTokens": 2}
        await handle.dispose()


async def test_a_chunk_that_is_not_lossless_json_still_fails_the_turn() -> None:
    async with stack([]) as ctx:
        ctx.llm.register_adapter("foreign", ForeignValueAdapter())
        handle = await ctx.agents.create(
            "f", agent_options=AgentOptions(provider="foreign", model="m")
        )
        handle.agent.followup("go")
        await handle.agent.when_idle()
        events = handle.agent.session.events
        assert "assistant/chunk" not in [e["type"] for e in events]
        end = next(e for e in events if e["type"] == "turn/end")["data"]["reason"]
        assert end == {
            "kind": "error",
            "error": {
                "message": 'session event "assistant/chunk" carries non-JSON-serializable data',
                "code": "UNKNOWN",
            },
        }
        await handle.dispose()
