"""The loop under the checkpoint policy: what is durable at each barrier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import stack, tool

from plugins.agent import AgentOptions
from plugins.llm import chunks

policy = pytest.importorskip("plugins.session_checkpoint_policy")

pytestmark = pytest.mark.anyio

SESSION = "barriers"


class ProbeAdapter:
    """Records what is durable when a request reaches it; calls one tool, then answers."""

    def __init__(self, ctx: Any, seen: dict[str, list[str]]) -> None:
        self.ctx = ctx
        self.seen = seen
        self.requests = 0

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests += 1
        stored = await self.ctx.sessionPersistence.read_from(SESSION, 0)
        self.seen[f"request {self.requests}"] = [e["type"] for e in stored]
        if self.requests == 1:
            block = chunks.tool_call_block("probe-call", "probe", "{}")
            yield chunks.block_start(0, "tool-call")
            yield chunks.block_end(0, block)
            yield chunks.finish(chunks.stop_reason("tool-calls"))
        else:
            yield chunks.block_start(0, "text")
            yield chunks.text_delta(0, "done")
            yield chunks.finish(chunks.stop_reason("stop"))


async def test_each_barrier_finds_the_loops_events_durable(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {}
    async with stack(
        [], root=tmp_path, persistence={"write_batch_max_delay_ms": 60000}, extra=[policy]
    ) as ctx:
        ctx.llm.register_adapter("probe", ProbeAdapter(ctx, seen))

        async def probe(args: Any, exec: Any) -> Any:
            stored = await ctx.sessionPersistence.read_from(SESSION, 0)
            seen["tool body"] = [e["type"] for e in stored]
            return "probed"

        ctx.tools.register(tool("probe", probe))
        handle = await ctx.agents.create(
            SESSION,
            meta={"cwd": str(tmp_path)},
            agent_options=AgentOptions(provider="probe", model="m"),
        )
        handle.agent.followup("exercise the barriers")
        await handle.agent.when_idle()
        live = [e["type"] for e in handle.agent.session.events]
        stored = [e["type"] for e in await ctx.sessionPersistence.read_from(SESSION, 0)]
        await handle.dispose()

    assert seen["request 1"] == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
    ]
    call = live.index("tool/call")
    assert seen["tool body"] == live[: call + 1]
    second_start = live.index("step/start", call)
    assert seen["request 2"] == live[: second_start + 1]
    assert live[call + 1 : second_start + 1] == ["tool/result", "step/end", "step/start"]
    assert stored == live
