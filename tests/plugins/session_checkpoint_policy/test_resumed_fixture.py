"""Acceptance case 14: resuming the original harness's interrupted session."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import plugins.agent
import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl
import plugins.tools
from framework import Context
from plugins.llm import chunks
from plugins.session_persistence.testing import FIXTURES

pytestmark = pytest.mark.anyio

FIXTURE = FIXTURES / "tool-outcome-unknown-resumed.jsonl"
ANSWER = (
    "I will verify the external state before deciding whether to retry the side-effecting "
    "operation."
)
PROMPT = "Continue safely from the interrupted operation."


class ScriptedAdapter:
    """One text answer in exactly the original's four chunks; records each request."""

    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append([dict(m) for m in options.messages])
        yield chunks.block_start(0, "text")
        yield chunks.text_delta(0, ANSWER)
        yield chunks.block_end(0, chunks.text_block(ANSWER))
        yield chunks.finish(chunks.stop_reason("stop"))


def fixture() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *events = (json.loads(line) for line in FIXTURE.read_text().splitlines())
    return header, events


def without_title(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture minus `session/title` (which the port does not write), renumbered."""
    (title_seq,) = [e["seq"] for e in events if e["type"] == "session/title"]
    out = []
    for event in copy.deepcopy(events):
        if event["seq"] == title_seq:
            continue
        if event["seq"] > title_seq:
            event["seq"] -= 1
        if "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = [
                s - 1 if s > title_seq else s for s in event["sourceEventSeqs"]
            ]
        out.append(event)
    return out


def normalise(events: list[dict[str, Any]], ids: dict[str, str]) -> list[dict[str, Any]]:
    """Zero times, map generated message ids to the fixture's, keep only compared header fields."""
    out = copy.deepcopy(events)
    for event in out:
        event["time"] = 0
        data = event["data"]
        message = data.get("message") if event["type"] != "user/message" else data
        if isinstance(message, dict) and message.get("id") in ids:
            message["id"] = ids[message["id"]]
        if event["type"] == "request/header":
            event["data"] = {"config": data["header"]["config"], "reason": data["reason"]}
        if event["type"] == "request/context":
            data.pop("contextWindow", None)
        if event["type"] == "agent/inbox/spliced":
            for inserted in data["inserted"]:
                inserted["id"] = ids.get(inserted["id"], inserted["id"])
    return out


async def test_14_resumed_session_sees_the_unknown_outcome(tmp_path: Path) -> None:
    header, events = fixture()
    seed = [e for e in events if e["seq"] <= 4]
    adapter = ScriptedAdapter()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(
            plugins.session_persistence_jsonl, {"root": str(tmp_path), "compression": "none"}
        )
        await ctx.plugin(plugins.session_checkpoint_policy)
        await ctx.plugin(
            plugins.agent,
            {
                "provider": "deepseek-official",
                "model": "deepseek-v4-flash",
                "system": "You are a helpful assistant.",
            },
        )
        ctx.llm.register_adapter("deepseek-official", adapter)
        meta = {k: v for k, v in header.items() if k != "type"}
        location = ctx.sessionPersistence.locate(meta)
        assert location is not None
        path = Path(location.path)
        path.parent.mkdir(parents=True, mode=0o700)
        lines = [json.dumps(header, separators=(",", ":"), ensure_ascii=False)]
        lines += [json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in seed]
        path.write_text("\n".join(lines) + "\n")
        os.chmod(path, 0o600)

        handle = await ctx.agents.resume(header["id"])
        handle.agent.followup(PROMPT)
        await handle.agent.when_idle()
        await handle.dispose()

        reloaded = (await ctx.sessionPersistence.load(header["id"])).events

    # What the model saw: the interrupted call, its unknown-outcome result, then the new prompt.
    (request,) = adapter.requests
    assert [m["role"] for m in request] == ["user", "assistant", "user", "user"]
    assert request[1]["content"][0]["id"] == "unknown-outcome-call"
    (result_block,) = request[2]["content"]
    assert result_block["type"] == "tool-result"
    assert result_block["toolCallId"] == "unknown-outcome-call"
    assert result_block["isError"] is True
    assert "Do not retry blindly." in result_block["content"][0]["text"]
    assert request[3]["content"] == [{"type": "text", "text": PROMPT}]

    # The reloaded log equals the fixture after normalisation (session/title omitted).
    expected = without_title(events)
    ids = {}
    for mine, theirs in zip(reloaded, expected, strict=False):
        for side in (mine, theirs):
            assert side["type"] == mine["type"]
        message = mine["data"] if mine["type"] == "user/message" else mine["data"].get("message")
        if isinstance(message, dict) and "id" in message:
            other = (
                theirs["data"] if theirs["type"] == "user/message" else theirs["data"]["message"]
            )
            ids[message["id"]] = other["id"]
    assert normalise(reloaded, ids) == normalise(expected, {})
    assert reloaded[5]["data"]["message"]["id"] == "interrupted-tool-result-unknown-outcome-call-5"
    assert reloaded[5]["sourceEventSeqs"] == [4]
    assert reloaded[-1]["data"]["reason"] == {"kind": "completed"}
