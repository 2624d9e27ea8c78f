"""P11: cold start of the CLI, whole process, on a session root of 10 and of 1000 sessions.

Each round runs, one after the other: `python -c pass` (the interpreter's own start-up), the
library floor (`p11_floor.py`: the least `dsh sessions` does, with the same libraries and none of
the project's code), `dsh sessions` on the 10-session root, `dsh sessions` on the 1000-session
root and `dsh show ID` on the 1000-session root, each as a fresh child process (the packaged
app, `DSH_HOME` pointing at the root). Wall time from spawn to exit; the cases alternate round by
round. Goals: `dsh sessions` ≤ 150 ms over the interpreter for 10 sessions; listing 1000
sessions ≤ 1 s.

The roots are written through the JSONL backend (zstd, as the app stores them): each session
holds one completed turn (a user message and a text answer, 6 events).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.harness import Row, Series, report, row
from plugins.session_persistence_jsonl import JsonlBackend

ROUNDS = 7
WARMUP = 1
SIZES = (10, 1000)
#: The least `dsh sessions` does, with its libraries and none of the project's modules.
FLOOR_SCRIPT = Path(__file__).with_name("p11_floor.py")
FLOOR_CASE = "library floor (typer, pydantic, ruamel.yaml, entry points, zstd, anyio)"
#: The console script's body, so the figures are those of `dsh` itself.
DSH = [sys.executable, "-c", "import sys; from apps.cli.main import main; main()"]


def turn(session_id: str, created_at: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A session's meta and one completed turn (6 events)."""
    meta = {"version": 0, "id": session_id, "createdAt": created_at, "cwd": "/bench"}
    t = created_at
    user = {
        "id": f"u-{session_id}",
        "role": "user",
        "content": [{"type": "text", "text": "What is the value of k?"}],
        "source": {"kind": "user"},
    }
    answer = {
        "id": f"a-{session_id}",
        "role": "assistant",
        "content": [{"type": "text", "text": "The value of k is 42."}],
        "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
    }
    events = [
        {"type": "turn/start", "seq": 0, "time": t, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": t, "data": {"turn": 1, "step": 1}},
        {
            "type": "user/message",
            "seq": 2,
            "time": t,
            "data": user,
            "surfaceOp": "append",
        },
        {
            "type": "assistant/message",
            "seq": 3,
            "time": t,
            "data": {"turn": 1, "step": 1, "message": answer},
            "sourceEventSeqs": [],
            "surfaceOp": "append",
        },
        {"type": "step/end", "seq": 4, "time": t, "data": {"turn": 1, "step": 1}},
        {
            "type": "turn/end",
            "seq": 5,
            "time": t,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    return meta, events


async def populate(home: Path, count: int) -> str:
    """Store `count` sessions under `home/sessions` (the app's JSONL root); return one id."""
    backend = JsonlBackend(home / "sessions", compression="zstd")
    try:
        for index in range(count):
            session_id = f"bench-{index:04d}"
            meta, events = turn(session_id, 1_700_000_000_000 + index)
            await backend.acquire_writer(session_id)
            await backend.append_batch(meta, events, is_materialized=False)
            await backend.release_writer(session_id)
    finally:
        await backend.aclose()
    return session_id


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child process; it must exit 0."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1:]} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def measure(
    rounds: int = ROUNDS, warmup: int = WARMUP, sizes: tuple[int, ...] = SIZES
) -> dict[str, Series]:
    """Series per case (interpreter, `dsh sessions` per size, `dsh show` on the largest)."""
    base = Path(tempfile.mkdtemp(prefix="dsh-p11-", dir=os.environ.get("DSH_BENCH_DIR")))
    try:
        homes = {n: base / f"home-{n}" for n in sizes}
        last = {n: anyio.run(populate, homes[n], n) for n in sizes}
        # An installed package has its bytecode compiled: without the cache every start would
        # compile ~100 modules from source (the warm-up round writes it).
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("DSH_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        largest = max(sizes)
        cases: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            FLOOR_CASE: ([sys.executable, str(FLOOR_SCRIPT), "sessions"], env),
        }
        for n in sizes:
            cases[f"dsh sessions · {n} sessions"] = (
                [*DSH, "sessions"],
                {**env, "DSH_HOME": str(homes[n])},
            )
        cases[f"dsh show ID · {largest} sessions"] = (
            [*DSH, "show", last[largest]],
            {**env, "DSH_HOME": str(homes[largest])},
        )
        series = {name: Series(name) for name in cases}
        for index in range(warmup + rounds):
            for name, (argv, case_env) in cases.items():
                elapsed = timed(argv, case_env)
                if index >= warmup:
                    series[name].samples.append(elapsed)
        return series
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    series = measure()
    interpreter = series["python -c pass"]
    rows: list[Row] = [row(interpreter, note="the interpreter's own start-up")]
    over: dict[str, float] = {}
    for name, found in series.items():
        if found is interpreter:
            continue
        over[name] = (found.median - interpreter.median) * 1000
        note = f"{over[name]:.0f} ms over the interpreter"
        if name == FLOOR_CASE:
            note += "; no project code (benchmarks/p11_floor.py)"
        rows.append(row(found, interpreter, note=note))
    report(
        "p11_cli_start",
        "dsh cold start, whole process (ratio: vs python -c pass)",
        rows,
        {
            "rounds": ROUNDS,
            "ms_over_interpreter": over,
            "goal": "dsh sessions <= 150 ms over the interpreter (10 sessions); 1000 listed <= 1 s",
        },
    )


if __name__ == "__main__":
    main()
