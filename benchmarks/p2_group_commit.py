"""P2: group commit of parallel dispatch checkpoints (goal ≤ 0.5 fsyncs per tool call).

An agent turn whose first response asks for 32 calls of a concurrency-safe tool in one step,
with the checkpoint policy mounted over JSONL raw in a temporary folder (real disk, default
write-behind window). Each call's `tools/execute` checkpoint flushes the session; the flushes
share the store's serialized drain, so they should cost far fewer than 32 fsyncs.

Counted through the JSONL `FileOps` seam: fsyncs from the first `tool/call` append until the last
body starts (the dispatch phase), divided by the calls; the whole turn's fsyncs are reported too.
Every body checks that its `tool/call` was durable when it started (tracked from the backend's
returned `append_batch` calls). Two cases alternate: a pool of 32 (all calls at once) and the
default pool of 10 (a rolling pool). The floor row is `os.write + os.fsync` of ~2 KB.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl as jsonl
import plugins.tools
from benchmarks.harness import Series, report, row, run_on_disk
from framework import Context
from plugins.session_persistence import mount_persistence
from plugins.session_persistence_jsonl import FileOps, JsonlBackend
from plugins.tools import Tool

CALLS = 32
ROUNDS = 40
WARMUP = 3
POOLS = {"pool 32": 32, "pool 10 (default)": 10}


def script(turns: int) -> list[dict[str, Any]]:
    """Per turn: one response with CALLS parallel lookups, then a text answer."""
    responses: list[dict[str, Any]] = []
    for turn in range(turns):
        calls = [
            {"id": f"t{turn}-c{index}", "name": "lookup", "arguments": {"key": index}}
            for index in range(CALLS)
        ]
        responses += [{"tool_calls": calls}, {"text": f"turn {turn}: {CALLS} lookups done"}]
    return responses


class CountingFileOps(FileOps):
    """The real OS calls, counting fsyncs."""

    def __init__(self) -> None:
        self.fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


@dataclass
class Case:
    """One stack and its per-turn figures."""

    name: str
    ops: CountingFileOps
    series: Series
    phase_fsyncs: list[int] = field(default_factory=list)
    turn_fsyncs: list[int] = field(default_factory=list)
    bodies: int = 0
    durable_before_body: int = 0
    #: Highest seq durably written so far (from returned `append_batch` calls).
    durable_seq: int = -1
    #: Per turn: fsync count at the first `tool/call` and at the latest body start.
    phase: list[int] = field(default_factory=list)
    handle: Any = None


@asynccontextmanager
async def mounted(root: Path, case: Case, pool: int, turns: int) -> AsyncIterator[Context]:
    """sessions, llm + replay, tools (`lookup`), counted JSONL raw, the policy, agents."""

    async def persistence(ctx: Context, _config: object) -> Any:
        backend = JsonlBackend(root, compression="none", fileops=case.ops)
        real_append_batch = backend.append_batch

        async def append_batch(meta: Any, events: Any, *, is_materialized: bool) -> None:
            await real_append_batch(meta, events, is_materialized=is_materialized)
            if events:
                case.durable_seq = max(case.durable_seq, events[-1]["seq"])

        backend.append_batch = append_batch  # type: ignore[method-assign]
        config = jsonl.Config(root=str(root), compression="none")
        return await mount_persistence(ctx, backend, config)

    async def lookup(args: Any, exec: Any) -> Any:
        events = exec.agent.session.events
        call_seq = next(
            e["seq"]
            for e in reversed(events)
            if e["type"] == "tool/call" and e["data"]["callId"] == exec.call_id
        )
        case.bodies += 1
        case.durable_before_body += case.durable_seq >= call_seq
        case.phase[1:] = [case.ops.fsyncs]
        await anyio.lowlevel.checkpoint()
        return {"key": args["key"], "value": 42}

    def on_event(session: Any, event: dict[str, Any]) -> None:
        if event["type"] == "tool/call" and not case.phase:
            case.phase.append(case.ops.fsyncs)

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(persistence, inject=("sessions",))
        await ctx.plugin(plugins.llm_replay, {"responses": script(turns)})
        await ctx.plugin(plugins.session_checkpoint_policy)
        await ctx.plugin(
            plugins.agent,
            {"provider": "replay", "model": "replay", "max_parallel_tool_calls": pool},
        )
        ctx.tools.register(
            Tool(
                name="lookup",
                description="look a key up (read-only)",
                parameters={"type": "object"},
                execute=lookup,
                is_concurrency_safe=True,
            )
        )
        ctx.on("session/event", on_event)
        yield ctx


async def turn(case: Case, *, record: bool) -> None:
    agent = case.handle.agent
    case.phase.clear()
    before = case.ops.fsyncs
    start = time.perf_counter()
    agent.followup(f"Look up {CALLS} keys at once.")
    await agent.when_idle()
    elapsed = time.perf_counter() - start
    if record:
        first, last = case.phase
        case.series.samples.append(elapsed)
        case.phase_fsyncs.append(last - first)
        case.turn_fsyncs.append(case.ops.fsyncs - before)


async def measure(directory: str, rounds: int = ROUNDS, warmup: int = WARMUP) -> list[Case]:
    """Alternate turns between the pool sizes; one session per case."""
    cases: list[Case] = []
    async with AsyncExitStack() as stack:
        for name, pool in POOLS.items():
            case = Case(name, CountingFileOps(), Series(f"turn, {CALLS} parallel calls, {name}"))
            root = Path(directory) / name.split()[1]
            ctx = await stack.enter_async_context(mounted(root, case, pool, warmup + rounds))
            case.handle = await ctx.agents.create(f"p2-{pool}", meta={"cwd": str(root)})
            cases.append(case)
        for index in range(warmup + rounds):
            for case in cases:
                await turn(case, record=index >= warmup)
        for case in cases:
            await case.handle.dispose()
    return cases


def summarise(cases: list[Case], floor: Series) -> None:
    """Print the table and write `benchmarks/results/p2_group_commit.json`."""
    rows = []
    extra: dict[str, object] = {
        "calls_per_step": CALLS,
        "fsync_floor_median_us": floor.median * 1e6,
    }
    for case in cases:
        per_call = statistics.median(case.phase_fsyncs) / CALLS
        worst = max(case.phase_fsyncs) / CALLS
        all_durable = case.durable_before_body == case.bodies
        rows.append(
            row(
                case.series,
                note=f"fsyncs/call {per_call:.3f} (max {worst:.3f}), "
                f"fsyncs/turn {statistics.median(case.turn_fsyncs)}, "
                f"tool/call durable before body {case.durable_before_body}/{case.bodies}",
            )
        )
        extra[case.name] = {
            "fsyncs_per_call_median": per_call,
            "fsyncs_per_call_max": worst,
            "dispatch_phase_fsyncs": case.phase_fsyncs,
            "turn_fsyncs_median": statistics.median(case.turn_fsyncs),
            "bodies": case.bodies,
            "all_calls_durable_before_body": all_durable,
            "within_goal": worst <= 0.5 and all_durable,
        }
    rows.append(row(floor, note="physical floor"))
    report("p2_group_commit", f"group commit of {CALLS} parallel dispatch checkpoints", rows, extra)


def main() -> None:
    run_on_disk("p2", measure, summarise, ROUNDS)


if __name__ == "__main__":
    main()
