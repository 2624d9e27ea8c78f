"""P8: one agent turn (replay model, one tool call, then a text answer) with vs without the
checkpoint policy, over the JSONL backend (raw) in a temporary folder.

Both stacks are identical (sessions, llm + replay, tools, JSONL, agents with the idle
checkpoint) except that one mounts `plugins.session_checkpoint_policy`; turns alternate between
them in one run. `os.fsync` calls are counted per turn, and `os.write + os.fsync` of ~2 KB is
timed on the same disk, so the goal reads: extra time per turn ≤ 1.5 × extra fsyncs × one fsync.
If the policy module is missing, only the baseline is measured.
"""

from __future__ import annotations

import importlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_persistence_jsonl
import plugins.tools
from benchmarks.harness import Series, alternate, alternate_async, report, row
from framework import Context
from plugins.tools import Tool

ROUNDS = 200
WARMUP = 10
SCRIPT = [
    {"tool_calls": [{"id": "lookup-1", "name": "lookup", "arguments": {"key": "k"}}]},
    {"text": "The value is 42."},
]


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
async def mounted(root: Path, policy: Any) -> AsyncIterator[Any]:
    """A stack with one agent whose replay script covers every round."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(
            plugins.session_persistence_jsonl, {"root": str(root), "compression": "none"}
        )
        await ctx.plugin(plugins.llm_replay, {"responses": SCRIPT * (ROUNDS + WARMUP + 1)})
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
        handle = await ctx.agents.create("p8", meta={"cwd": str(root)})
        yield handle.agent
        await handle.dispose()


def turn_case(
    agent: Any, fsyncs: list[int], counter: FsyncCounter
) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        before = counter.count
        agent.followup("What is the value of k?")
        await agent.when_idle()
        fsyncs.append(counter.count - before)
        return None

    return run


def fsync_floor(directory: str, rounds: int) -> Series:
    """`os.write` + `os.fsync` of ~2 KB appended to one file (the physical floor)."""
    path = os.path.join(directory, "floor.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    payload = b"x" * 2048

    def write_and_sync() -> None:
        os.write(fd, payload)
        os.fsync(fd)

    try:
        return alternate({"write+fsync 2KB": write_and_sync}, rounds)["write+fsync 2KB"]
    finally:
        os.close(fd)


async def measure(directory: str) -> None:
    policy = load_policy()
    async with AsyncExitStack() as stack:
        base = await stack.enter_async_context(mounted(Path(directory) / "base", None))
        with FsyncCounter() as counter:
            fsyncs: dict[str, list[int]] = {"without policy": [], "with policy": []}
            cases = {"without policy": turn_case(base, fsyncs["without policy"], counter)}
            if policy is not None:
                checked = await stack.enter_async_context(
                    mounted(Path(directory) / "policy", policy)
                )
                cases["with policy"] = turn_case(checked, fsyncs["with policy"], counter)
            await alternate_async(cases, WARMUP)
            for values in fsyncs.values():
                values.clear()
            series = await alternate_async(cases, ROUNDS)
    floor = fsync_floor(directory, ROUNDS)
    baseline = series["without policy"]
    rows = [row(baseline, note=f"fsyncs/turn {statistics.median(fsyncs['without policy'])}")]
    extra: dict[str, object] = {"fsync_floor_median_us": floor.median * 1e6}
    if "with policy" in series:
        checked_series = series["with policy"]
        extra_fsyncs = statistics.median(fsyncs["with policy"]) - statistics.median(
            fsyncs["without policy"]
        )
        difference = checked_series.median - baseline.median
        bound = 1.5 * extra_fsyncs * floor.median
        rows.append(
            row(
                checked_series,
                baseline,
                note=f"fsyncs/turn {statistics.median(fsyncs['with policy'])}",
            )
        )
        extra.update(
            extra_fsyncs_per_turn=extra_fsyncs,
            difference_us=difference * 1e6,
            bound_us=bound * 1e6,
            within_goal=difference <= bound,
        )
        note = f"difference {difference * 1e6:.1f} µs vs bound {bound * 1e6:.1f} µs"
    else:
        note = "policy module not available: baseline only"
    rows.append(row(floor, note="physical floor"))
    report("p8_turn", f"agent turn with vs without the checkpoint policy ({note})", rows, extra)


def main() -> None:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dsh-p8-") as directory:
        anyio.run(measure, directory)
    print(f"(p8 took {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
