"""Hard-crash acceptance of the checkpoint policy (docs/checkpoint-policy.md; R1).

A real child Python process runs an agent against the JSONL backend with a 60 s write-behind
window (so only the policy's barriers persist anything) and is SIGKILLed at a failpoint; a fresh
context then loads the log. The parent's checks run on asyncio and trio.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crash import (
    MARKERS,
    NOT_STARTED,
    REQUEST_PREFIX,
    SESSION_ID,
    UNKNOWN,
    assert_contiguous,
    assert_resumed_turn_runs,
    assert_tool_mode_repair,
    crash,
    jsonl,
    reopened,
    results_by_call,
    types,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fcntl locks are POSIX-only"),
]


async def test_12_request_mode_leaves_exactly_the_request_events(tmp_path: Path) -> None:
    crash(tmp_path, "request")
    async with reopened(jsonl(tmp_path)) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
    assert types(log.events) == [*REQUEST_PREFIX, "step/end", "turn/end"]
    assert log.events[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert log.events[5]["data"]["reason"] == "initial"
    assert_contiguous(log.events)


async def test_13_tool_mode_records_an_unknown_outcome(tmp_path: Path) -> None:
    crash(tmp_path, "tool")
    backend = jsonl(tmp_path)
    async with reopened(backend) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
    events = log.events
    assert_tool_mode_repair(events)
    async with reopened(backend) as ctx:
        again = await ctx.sessionPersistence.load(SESSION_ID)
    assert again.events == events


async def test_15_without_the_policy_the_started_call_is_not_durable(tmp_path: Path) -> None:
    # Control: the backend alone is valid, and the tool body did run (the marker was reached) ...
    assert crash(tmp_path, "tool", no_policy=True) == MARKERS["tool"]
    async with reopened(jsonl(tmp_path)) as ctx:
        stored = [h["id"] for h in await ctx.sessionPersistence.list()]
        if SESSION_ID not in stored:
            return  # nothing durable at all
        log = await ctx.sessionPersistence.load(SESSION_ID)
    # ... but its tool/call never became durable: recovery could at best say "not started".
    assert "tool/call" not in types(log.events)


async def test_r1_mid_stream_loses_only_the_partial_response(tmp_path: Path) -> None:
    crash(tmp_path, "midstream")
    async with reopened(jsonl(tmp_path), [{"text": "resumed"}]) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
        assert types(log.events) == [*REQUEST_PREFIX, "step/end", "turn/end"]
        await assert_resumed_turn_runs(ctx, len(log.events))


async def test_r1_between_two_parallel_results(tmp_path: Path) -> None:
    crash(tmp_path, "parallel")
    async with reopened(jsonl(tmp_path), [{"text": "resumed"}]) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
        events = log.events
        assert_contiguous(events)
        by_call = results_by_call(events)
        # Both calls were durable before their bodies ran; each has exactly one result now.
        assert [e["data"]["callId"] for e in events if e["type"] == "tool/call"] == [
            "fast-call",
            "slow-call",
        ]
        assert sorted(by_call) == ["fast-call", "slow-call"]
        assert all(len(found) == 1 for found in by_call.values())
        assert by_call["slow-call"][0]["data"]["error"] == UNKNOWN
        fast = by_call["fast-call"][0]
        assert fast["data"].get("error") in (None, UNKNOWN)
        assert types(events)[-2:] == ["step/end", "turn/end"]
        await assert_resumed_turn_runs(ctx, len(events))


async def test_r1_inside_a_persistence_write(tmp_path: Path) -> None:
    # The batch holding the tool/call is torn mid-write: it was never acknowledged, so the body
    # never ran, and the log loads as its complete lines plus closers.
    assert crash(tmp_path, "write") == MARKERS["write"]
    async with reopened(jsonl(tmp_path), [{"text": "resumed"}]) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
        events = log.events
        assert_contiguous(events)
        # Complete lines of the torn batch survive; the tool/call line (its last) did not.
        assert types(events)[:7] == REQUEST_PREFIX
        assert "tool/call" not in types(events)
        tail = [t for t in types(events)[7:] if t != "assistant/chunk"]
        if "assistant/message" in tail:
            # The call is known but never recorded as started: the honest answer is NOT_STARTED.
            (result,) = results_by_call(events)["crash-call"]
            assert result["data"]["error"] == NOT_STARTED
            assert tail == ["assistant/message", "tool/result", "step/end", "turn/end"]
        else:
            assert tail == ["step/end", "turn/end"]
        await assert_resumed_turn_runs(ctx, len(events))


async def test_r1_tool_body_started_then_resume_sees_the_repair(tmp_path: Path) -> None:
    crash(tmp_path, "tool")
    async with reopened(jsonl(tmp_path), [{"text": "checking first"}]) as ctx:
        handle = await ctx.agents.resume(SESSION_ID)
        handle.agent.followup("what happened?")
        await handle.agent.when_idle()
        events = handle.agent.session.events
        await handle.dispose()
    (result,) = results_by_call(events)["crash-call"]
    assert result["data"]["error"] == UNKNOWN
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
    assert events[-1]["data"]["turn"] == 2


async def test_a_prompt_queued_before_the_kill_runs_once_after_resume(tmp_path: Path) -> None:
    # The second prompt waited in next-turn (durable) when the child was killed mid-turn.
    assert crash(tmp_path, "queued") == MARKERS["queued"]
    answers = [{"text": "did the queued one"}, {"text": "did the new one"}]
    async with reopened(jsonl(tmp_path), answers) as ctx:
        result = await ctx.agents.run("after the crash", session=SESSION_ID)
        events = list(ctx.agents.get(SESSION_ID).session.events)
    prompts = [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]
    assert prompts == ["exercise the crash boundary", "queued before the crash", "after the crash"]
    ends = [
        (e["data"]["turn"], e["data"]["reason"]["kind"]) for e in events if e["type"] == "turn/end"
    ]
    assert ends == [(1, "interrupted"), (2, "completed"), (3, "completed")]
    assert (result.turn, result.text) == (3, "did the new one")
    assert_contiguous(events)
