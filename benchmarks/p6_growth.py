"""P6: per-checkpoint cost as history grows, JSONL raw (goal: flat, O(new events)).

Three live sessions hold 10, 100 and 1000 prior messages (complete user/assistant turns, seeded
and flushed before timing). Each round appends the same 5-event step batch (~2 KB) to each and
times `await ctx.sessions.flush(session)`, alternating between the sessions; ratios are to the
10-message session.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import plugins.session as session_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
from benchmarks.harness import Row, Series, report, row
from benchmarks.p1_checkpoint import _step
from framework import Context
from plugins.session_persistence.testing import complete_turn

ROUNDS = 300
WARMUP = 20
HISTORY = (10, 100, 1000)
STEP_EVENTS = 5


def _history(messages: int) -> list[dict[str, Any]]:
    """`messages` prior messages: complete turns of one user and one assistant message."""
    events: list[dict[str, Any]] = []
    for turn in range(1, messages // 2 + 1):
        events.extend(complete_turn(len(events), turn))
    return events


async def measure(rounds: int = ROUNDS, warmup: int = WARMUP) -> list[Series]:
    """One series per history size, in `HISTORY` order."""
    found = [Series(f"flush · {n} prior messages") for n in HISTORY]
    base = Path(tempfile.mkdtemp(prefix="dsh-p6-", dir=os.environ.get("DSH_BENCH_DIR")))
    try:
        async with Context() as ctx:
            await ctx.plugin(session_plugin)
            await ctx.plugin(jsonl_plugin, {"root": str(base), "compression": "none"})
            sessions = []
            for n in HISTORY:
                seed = _history(n)
                session = ctx.sessions.create(f"p6-{n}", seed=seed, meta={"cwd": "/bench"})
                turn = n // 2 + 1
                session.append("turn/start", {"turn": turn})
                await ctx.sessions.flush(session)
                sessions.append((session, turn))
            for index in range(warmup + rounds):
                for series, (session, turn) in zip(found, sessions, strict=True):
                    _step(session, turn, index + 1, STEP_EVENTS)
                    start = time.perf_counter()
                    await ctx.sessions.flush(session)
                    elapsed = time.perf_counter() - start
                    if index >= warmup:
                        series.samples.append(elapsed)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return found


def main() -> None:
    found = anyio.run(measure)
    rows: list[Row] = [row(found[0], note="baseline")]
    rows += [row(series, found[0], note="goal: flat") for series in found[1:]]
    report(
        "p6_growth",
        f"per-checkpoint cost ({STEP_EVENTS}-event step) vs prior messages, JSONL raw",
        rows,
        {"rounds": ROUNDS, "history": list(HISTORY), "step_events": STEP_EVENTS},
    )


if __name__ == "__main__":
    main()
