"""A replayed multi-step conversation over the real JSONL backend, reloaded afterwards."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from agent_helpers import call, stack, tool

from plugins.session.messages import derive_messages
from plugins.session.repair import interrupted_turn_closers

pytestmark = pytest.mark.anyio

SCRIPT = [
    {
        "reasoning": "I should look at both files at once.",
        "text": "Reading the files.",
        "tool_calls": [
            call("r1", "read", {"path": "a.txt"}),
            call("r2", "read", {"path": "b.txt"}),
            call("bad", "fail", {}),
        ],
    },
    {"tool_calls": [call("slow", "wait", {})]},
    {"text": "Both files are read; one tool failed and one timed out."},
]


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_a_replayed_conversation_reloads_to_what_the_model_saw(
    tmp_path: Path, compression: str
) -> None:
    seen: list[list[dict[str, Any]]] = []

    def record(options: Any, next: Callable[[], AsyncIterable[Any]]) -> AsyncIterable[Any]:
        seen.append(copy.deepcopy(list(options.messages)))
        return next()

    async def read(args: Any, exec: Any) -> Any:
        await anyio.sleep(0.001)
        return f"contents of {args['path']}"

    async def fail(args: Any, exec: Any) -> Any:
        raise ValueError("disk on fire")

    async def wait(args: Any, exec: Any) -> Any:
        await exec.signal.wait()
        return "never seen"

    async with stack(
        SCRIPT, root=tmp_path, timeout_policy=True, persistence={"compression": compression}
    ) as ctx:
        ctx.on("llm/stream", record)
        ctx.tools.register(tool("read", read, parallel=True))
        ctx.tools.register(tool("fail", fail))
        ctx.tools.register(tool("wait", wait, timeout_ms=10))
        handle = await ctx.agents.create("e2e", meta={"cwd": str(tmp_path)})
        agent = handle.agent
        agent.followup("Read a.txt and b.txt.")
        await agent.when_idle()
        live = [copy.deepcopy(e) for e in agent.session.events]
        await handle.dispose()

    async with stack([], root=tmp_path, persistence={"compression": compression}) as ctx:
        loaded = (await ctx.sessionPersistence.load("e2e")).events

    assert loaded == live
    assert interrupted_turn_closers(loaded) == []
    assert live[-1]["data"] == {"turn": 1, "reason": {"kind": "completed"}}
    first_chunks = [
        e["seq"]
        for e in loaded
        if e["type"] == "assistant/chunk"
        and e["data"]["chunk"]["type"] == "block-start"
        and e["data"]["chunk"]["index"] == 0
    ]
    assert len(first_chunks) == len(seen) == 3
    for seq, messages in zip(first_chunks, seen, strict=True):
        assert derive_messages(loaded[:seq]) == messages
    final = derive_messages(loaded)
    assert [m["role"] for m in final] == [
        "user",
        "assistant",
        "user",
        "user",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [b["type"] for b in final[1]["content"]] == [
        "reasoning",
        "text",
        "tool-call",
        "tool-call",
        "tool-call",
    ]
    results = {
        m["source"]["callId"]: m["content"][0] for m in final if m["source"]["kind"] == "tool"
    }
    assert results["r1"]["content"] == [{"type": "text", "text": "contents of a.txt"}]
    assert results["bad"]["isError"] is True
    assert results["bad"]["content"] == [{"type": "text", "text": "Error: disk on fire"}]
    assert results["slow"]["content"] == [
        {"type": "text", "text": "Error: tool call timed out after 10ms"}
    ]
    errors = [e["data"].get("error") for e in loaded if e["type"] == "tool/result"]
    assert errors == [None, None, None, {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}]


async def test_many_agents_with_parallel_tools_share_one_backend(tmp_path: Path) -> None:
    async def read(args: Any, exec: Any) -> Any:
        await anyio.sleep(0.001 * (args["i"] % 3))
        return args["i"]

    script = [
        {"tool_calls": [call(f"c{i}", "read", {"i": i}) for i in range(4)]},
        {"text": "done"},
    ]
    ids = [f"many-{n}" for n in range(8)]
    async with stack(script, root=tmp_path) as ctx:
        ctx.tools.register(tool("read", read, parallel=True))
        handles = [await ctx.agents.create(i, meta={"cwd": str(tmp_path)}) for i in ids]
        for handle in handles:
            handle.agent.followup("go")
        for handle in handles:
            await handle.agent.when_idle()
        live = {h.agent.id: [copy.deepcopy(e) for e in h.agent.session.events] for h in handles}
        for handle in handles:
            await handle.dispose()

    async with stack([], root=tmp_path) as ctx:
        for session_id in ids:
            loaded = (await ctx.sessionPersistence.load(session_id)).events
            assert [e["seq"] for e in loaded] == list(range(len(loaded)))
            assert loaded == live[session_id]
            assert loaded[-1]["data"]["reason"] == {"kind": "completed"}
