"""The agent loop gives every tool call `exec.idempotency_key`: the same call ids in two
sessions are two calls, and a tool can find a call's key from its id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import call, stack, tool

import plugins.demo_tools
from plugins.tools import idempotency_key

pytestmark = pytest.mark.anyio


async def test_the_loop_passes_each_call_its_key(tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    async def record(args: Any, exec: Any) -> Any:
        seen[exec.call_id] = exec.idempotency_key
        return "ok"

    script = [{"tool_calls": [call("c1", "record"), call("c2", "record")]}, {"text": "done"}]
    async with stack(script, root=tmp_path) as ctx:
        ctx.tools.register(tool("record", record, parallel=True))
        handle = await ctx.agents.create("keyed")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        store = await ctx.sessions.identity()
        await handle.dispose()
    assert seen == {
        "c1": idempotency_key(store, "keyed", "c1"),
        "c2": idempotency_key(store, "keyed", "c2"),
    }


async def test_two_sessions_with_the_same_call_ids_both_append(tmp_path: Path) -> None:
    """The replay script's call ids are fixed; the ledger is shared: both appends are new."""
    ledger = tmp_path / "ledger.jsonl"
    append = call("call-ledger", "append_ledger", {"entry": "x"})
    script = [{"tool_calls": [append]}, {"text": "ok"}]
    statuses: list[str] = []
    demo = {"workspace": str(tmp_path), "ledger_path": str(ledger)}
    for session_id in ("first", "second"):
        async with stack(script, root=tmp_path / "sessions") as ctx:
            await ctx.plugin(plugins.demo_tools, demo)
            handle = await ctx.agents.create(session_id)
            handle.agent.followup("record it")
            await handle.agent.when_idle()
            results = [e for e in handle.agent.session.events if e["type"] == "tool/result"]
            block = results[0]["data"]["message"]["content"][0]["content"][0]
            statuses.append(json.loads(block["text"])["status"])
            await handle.dispose()
    assert statuses == ["appended", "appended"]
    keys = [json.loads(line)["key"] for line in ledger.read_text().splitlines()]
    assert len(set(keys)) == 2


async def test_find_ledger_entry_takes_a_call_id_of_this_session(tmp_path: Path) -> None:
    """The model knows call ids, not keys: looking up an unknown-outcome call by its id works."""
    ledger = tmp_path / "ledger.jsonl"
    script = [
        {"tool_calls": [call("call-pay", "append_ledger", {"entry": "paid"})]},
        {"tool_calls": [call("call-check", "find_ledger_entry", {"key": "call-pay"})]},
        {"text": "ok"},
    ]
    demo = {"workspace": str(tmp_path), "ledger_path": str(ledger)}
    async with stack(script, root=tmp_path / "sessions") as ctx:
        await ctx.plugin(plugins.demo_tools, demo)
        handle = await ctx.agents.create("checks")
        handle.agent.followup("pay, then check")
        await handle.agent.when_idle()
        results = [e for e in handle.agent.session.events if e["type"] == "tool/result"]
        store = await ctx.sessions.identity()
        await handle.dispose()
    found = json.loads(results[1]["data"]["message"]["content"][0]["content"][0]["text"])
    assert found["entry"] == "paid"
    assert found["key"] == idempotency_key(store, "checks", "call-pay")
