"""P8: one agent turn (replay model, one tool call, then a text answer) with vs without the
checkpoint policy, over the JSONL backend (raw) in a temporary folder.

Both stacks are identical (sessions, llm + replay, tools, JSONL, agents with the idle
checkpoint) except that one mounts `plugins.session_checkpoint_policy`; each pair runs twice,
with the library default (writes on the I/O thread) and with the `dsh` CLI's
`inlineWriteMaxMs: 2` (docs/performance.md); turns alternate between the four in one run.
`os.fsync` calls are counted per turn, and `os.write + os.fsync` of ~2 KB is timed on the same
disk, so the goal reads: extra time per turn ≤ 1.5 × extra fsyncs × one fsync. If the policy
module is missing, only the baselines are measured.
"""

from __future__ import annotations

import importlib
import os
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_persistence_jsonl
import plugins.tools
from benchmarks.harness import Series, report, row, run_on_disk
from framework import Context
from plugins.tools import Tool

ROUNDS = 200
WARMUP = 10
PER_SESSION = 25
#: `inlineWriteMaxMs` of the inline stacks (the `dsh` CLI's app sets the same).
INLINE_MAX_MS = 2.0
MODES = (("I/O thread", 0.0), ("inline gate", INLINE_MAX_MS))


def script(turns: int) -> list[dict[str, Any]]:
    """Per session: a tool call, then a text answer, each turn (call ids unique per session:
    a reused id ends the turn with an error)."""
    responses: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        call = {"id": f"lookup-{turn}", "name": "lookup", "arguments": {"key": "k"}}
        responses += [{"tool_calls": [call]}, {"text": "The value is 42."}]
    return responses


def load_policy() -> Any:
    """The checkpoint policy module, or None while it does not exist."""
    try:
        module = importlib.import_module("plugins.session_checkpoint_policy")
    except ImportError:
        return None
    return module if callable(getattr(module, "apply", None)) else None


class FsyncCounter:
    """Counts `os.fsync` calls while installed."""

    def __init__(self) -> None:
        self.count = 0
        self._real = os.fsync

    def __enter__(self) -> FsyncCounter:
        real = self._real

        def counting(fd: Any) -> None:
            self.count += 1
            real(fd)

        os.fsync = counting
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


async def lookup(args: Any, exec: Any) -> Any:
    return {"key": args["key"], "value": 42}


@asynccontextmanager
async def mounted(root: Path, policy: Any, inline_ms: float = 0.0) -> AsyncIterator[Context]:
    """The stack: sessions, llm + replay, tools (`lookup`), JSONL raw with `inlineWriteMaxMs`
    `inline_ms`, the policy if given."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        config = {"root": str(root), "compression": "none", "inlineWriteMaxMs": inline_ms}
        await ctx.plugin(plugins.session_persistence_jsonl, config)
        await ctx.plugin(plugins.llm_replay, {"responses": script(PER_SESSION + 1)})
        if policy is not None:
            await ctx.plugin(policy)
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay"})
        ctx.tools.register(
            Tool(
                name="lookup",
                description="look a key up",
                parameters={"type": "object"},
                execute=lookup,
            )
        )
        yield ctx


class Case:
    """One stack; its agent is replaced every `PER_SESSION` turns so history stays short."""

    def __init__(self, name: str, ctx: Context, root: Path, counter: FsyncCounter) -> None:
        self.series = Series(name)
        self.fsyncs: list[int] = []
        self._ctx = ctx
        self._root = root
        self._counter = counter
        self._handle: Any = None
        self._sessions = 0

    async def fresh(self) -> None:
        """A new session (its log materialized by one untimed turn)."""
        if self._handle is not None:
            await self._handle.dispose()
        self._sessions += 1
        self._handle = await self._ctx.agents.create(
            f"p8-{self._sessions}", meta={"cwd": str(self._root)}
        )
        await self.turn(record=False)

    async def turn(self, *, record: bool = True) -> None:
        agent = self._handle.agent
        before = self._counter.count
        start = time.perf_counter()
        agent.followup("What is the value of k?")
        await agent.when_idle()
        elapsed = time.perf_counter() - start
        end = agent.session.events[-1]
        if end["type"] != "turn/end" or end["data"]["reason"]["kind"] != "completed":
            raise RuntimeError(f"{self.series.name}: the turn did not complete: {end}")
        if record:
            self.series.samples.append(elapsed)
            self.fsyncs.append(self._counter.count - before)


async def measure(directory: str, rounds: int = ROUNDS, warmup: int = WARMUP) -> list[Case]:
    """Alternate turns between the stacks: per mode the baseline, then (if present) the policy."""
    policy = load_policy()
    counter = FsyncCounter()
    cases: list[Case] = []
    async with AsyncExitStack() as stack:
        for mode, inline_ms in MODES:
            for kind, plugin in (("without policy", None), ("with policy", policy)):
                if kind == "with policy" and plugin is None:
                    continue
                name = f"{kind}, {mode}"
                root = Path(directory) / name.replace(" ", "-").replace(",", "").replace("/", "")
                ctx = await stack.enter_async_context(mounted(root, plugin, inline_ms))
                cases.append(Case(name, ctx, root, counter))
        with counter:
            for index in range(warmup + rounds):
                if index % PER_SESSION == 0:
                    for case in cases:
                        await case.fresh()
                for case in cases:
                    await case.turn(record=index >= warmup)
    return cases


def summarise(cases: list[Case], floor: Series) -> None:
    """Print the table and write `benchmarks/results/p8_turn.json`."""
    pairs = len(cases) // len(MODES)
    rows = []
    extra: dict[str, object] = {"fsync_floor_median_us": floor.median * 1e6}
    notes = []
    for index, (mode, inline_ms) in enumerate(MODES):
        base, *checked = cases[index * pairs : (index + 1) * pairs]
        rows.append(row(base.series, note=f"fsyncs/turn {statistics.median(base.fsyncs)}"))
        if not checked:
            notes.append("policy module not available: baseline only")
            continue
        policed = checked[0]
        extra_fsyncs = statistics.median(policed.fsyncs) - statistics.median(base.fsyncs)
        difference = policed.series.median - base.series.median
        bound = 1.5 * extra_fsyncs * floor.median
        rows.append(
            row(
                policed.series,
                base.series,
                note=f"fsyncs/turn {statistics.median(policed.fsyncs)}",
            )
        )
        extra[mode] = {
            "inline_write_max_ms": inline_ms,
            "extra_fsyncs_per_turn": extra_fsyncs,
            "difference_us": difference * 1e6,
            "bound_us": bound * 1e6,
            "within_goal": difference <= bound,
        }
        notes.append(f"{mode}: difference {difference * 1e6:.1f} µs vs bound {bound * 1e6:.1f} µs")
    rows.append(row(floor, note="physical floor"))
    title = f"agent turn with vs without the checkpoint policy ({'; '.join(notes)})"
    report("p8_turn", title, rows, extra)


def main() -> None:
    run_on_disk("p8", measure, summarise, ROUNDS)


if __name__ == "__main__":
    main()
