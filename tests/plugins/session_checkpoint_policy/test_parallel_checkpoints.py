"""N4: parallel top-level calls each checkpoint, sharing the persistence drain;
plus a run of the P2 group-commit benchmark (README.md), whose figures are never asserted.

A real stack: sessions, llm + replay, tools, JSONL raw with a 60 s write-behind window (so only
barriers write), the policy and an agent. One response asks for three calls of a
concurrency-safe tool; every body waits until all three run, so they truly overlap.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_checkpoint_policy as policy
import plugins.session_persistence_jsonl
import plugins.tools
from benchmarks import p2_group_commit
from framework import Context
from plugins.session_checkpoint_policy import CheckpointFlushed
from plugins.tools import Tool

pytestmark = pytest.mark.anyio

SESSION = "parallel-checkpoints"
CALLS = ["probe-1", "probe-2", "probe-3"]
SCRIPT = [
    {"tool_calls": [{"id": call_id, "name": "probe", "arguments": {}} for call_id in CALLS]},
    {"text": "all three probes ran"},
]


@asynccontextmanager
async def mounted(root: Path) -> AsyncIterator[Context]:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(
            plugins.session_persistence_jsonl,
            {"root": str(root), "compression": "none", "write_batch_max_delay_ms": 60_000},
        )
        await ctx.plugin(plugins.llm_replay, {"responses": SCRIPT})
        await ctx.plugin(policy)
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay"})
        yield ctx


async def test_n4_three_parallel_calls_each_checkpoint_before_their_body(tmp_path: Path) -> None:
    async with mounted(tmp_path) as ctx:
        metrics: list[CheckpointFlushed] = []
        ctx.on("checkpoint/flushed", metrics.append)

        # Count durable writes: every `append_batch` of the backend instance.
        backend = ctx.sessionPersistence.backend
        real_append_batch = backend.append_batch
        writes: list[list[str]] = []

        async def append_batch(meta: Any, events: Any, *, is_materialized: bool) -> None:
            await real_append_batch(meta, events, is_materialized=is_materialized)
            writes.append([event["type"] for event in events])

        backend.append_batch = append_batch
        writes_before_calls: list[int] = []

        def on_event(session: Any, event: dict[str, Any]) -> None:
            if event["type"] == "tool/call" and not writes_before_calls:
                writes_before_calls.append(len(writes))

        ctx.on("session/event", on_event)

        durable_at_body: dict[str, bool] = {}
        writes_at_body: list[int] = []
        all_running = anyio.Event()

        async def probe(args: Any, exec: Any) -> str:
            stored = await ctx.sessionPersistence.read_from(SESSION, 0)
            durable_at_body[exec.call_id] = any(
                e["type"] == "tool/call" and e["data"]["callId"] == exec.call_id for e in stored
            )
            writes_at_body.append(len(writes))
            if len(writes_at_body) == len(CALLS):
                all_running.set()
            with anyio.fail_after(10):
                await all_running.wait()  # the three bodies overlap
            return "probed"

        ctx.tools.register(
            Tool(
                name="probe",
                description="a concurrency-safe probe",
                parameters={"type": "object"},
                execute=probe,
                is_concurrency_safe=True,
            )
        )
        handle = await ctx.agents.create(SESSION, meta={"cwd": str(tmp_path)})
        handle.agent.followup("run three probes at once")
        await handle.agent.when_idle()
        live = list(handle.agent.session.events)
        stored = await ctx.sessionPersistence.read_from(SESSION, 0)
        await handle.dispose()

    dispatch = [m for m in metrics if m.barrier == "tools/execute"]
    assert sorted(m.call_id for m in dispatch if m.call_id is not None) == CALLS
    assert all(m.ok and m.session_id == SESSION for m in dispatch)
    assert durable_at_body == dict.fromkeys(CALLS, True)
    assert [e["seq"] for e in live] == list(range(len(live)))
    assert stored == live
    assert [e["data"]["callId"] for e in live if e["type"] == "tool/call"] == CALLS
    # The three checkpoints share the store's drain: at most one write each, here usually one.
    (before,) = writes_before_calls
    tool_phase_writes = max(writes_at_body) - before
    assert 1 <= tool_phase_writes <= len(CALLS), writes


async def test_p2_group_commit_benchmark_runs(tmp_path: Path) -> None:
    # Figures come from `python -m benchmarks p2_group_commit`; here only that it runs and that
    # every body found its `tool/call` durable (a correctness property, not a timing).
    cases = await p2_group_commit.measure(str(tmp_path), rounds=1, warmup=0)
    assert [case.name for case in cases] == list(p2_group_commit.POOLS)
    for case in cases:
        assert case.bodies == p2_group_commit.CALLS
        assert case.durable_before_body == case.bodies
        assert len(case.phase_fsyncs) == 1
        assert 1 <= case.phase_fsyncs[0] <= p2_group_commit.CALLS
