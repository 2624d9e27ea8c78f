"""P5: cold load + repair of a 100k-event JSONL log, raw and zstd.

The P4 chunk-heavy log (~100k events, packed rows) is written turn by turn, its last turn left
open inside a step, and a torn tail appended (half a line in raw mode, half a frame in zstd). Each
round restores those bytes and times, in a fresh backend instance: `load_stored` (read, decode,
find the torn tail), the crash closers, and `commit_repair` (truncate, append the closers, fsync).
The service row does the same through `ctx.sessionPersistence.load` (the coordinator also
validates every event and builds the Session). Goals: raw ≤ 1 s; zstd ≤ 2× raw.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import anyio

import plugins.session
import plugins.session_persistence_jsonl as jsonl
from benchmarks.harness import Row, Series, report, row
from benchmarks.p4_throughput import EVENTS, META, batches_of, chunk_heavy_steps
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import compress_frame

ROUNDS = 5
MODES = ("none", "zstd")


async def build(root: Path, mode: str) -> tuple[Path, bytes, int]:
    """Write the log with an open last turn and a torn tail; return its path, bytes, events."""
    steps = chunk_heavy_steps(EVENTS, open_last_turn=True)
    backend = JsonlBackend(root, compression=mode)  # type: ignore[arg-type]
    await backend.acquire_writer(META["id"])
    batches = batches_of(steps, "turn")
    for index, batch in enumerate(batches):
        await backend.append_batch(META, batch, is_materialized=index > 0)
    await backend.aclose()
    path = Path(backend.locate(META).path)
    events = sum(len(b) for b in batches)
    extra = (dumps({"type": "step/end", "seq": events, "time": 0, "data": {}}) + "\n").encode()
    tail = compress_frame(extra * 20) if mode == "zstd" else extra
    data = await anyio.Path(path).read_bytes() + tail[: len(tail) // 2]
    return path, data, events


async def backend_round(root: Path, path: Path, data: bytes, mode: str) -> float:
    await anyio.Path(path).write_bytes(data)
    backend = JsonlBackend(root, compression=mode)  # type: ignore[arg-type]
    start = time.perf_counter()
    stored = await backend.load_stored(META["id"])
    assert stored is not None
    assert stored.torn_marker is not None
    closers = interrupted_turn_closers(stored.events)
    await backend.commit_repair(stored.meta, stored.torn_marker, closers)
    elapsed = time.perf_counter() - start
    await backend.aclose()
    return elapsed


async def service_round(root: Path, path: Path, data: bytes, mode: str) -> float:
    await anyio.Path(path).write_bytes(data)
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": str(root), "compression": mode})
        start = time.perf_counter()
        log = await ctx.sessionPersistence.load(META["id"])
        elapsed = time.perf_counter() - start
        assert log.events[-1]["type"] == "turn/end"
    return elapsed


async def measure() -> tuple[list[Row], dict[str, object]]:
    base = Path(tempfile.mkdtemp(prefix="dsh-p5-", dir=os.environ.get("DSH_BENCH_DIR")))
    rows: list[Row] = []
    medians: dict[str, float] = {}
    try:
        logs = {mode: (base / mode, *await build(base / mode, mode)) for mode in MODES}
        events = logs["none"][3]
        series = {
            (kind, mode): Series(f"{kind} · {mode}")
            for kind in ("backend", "service")
            for mode in MODES
        }
        for _ in range(ROUNDS):
            for mode in MODES:
                root, path, data, _ = logs[mode]
                series["backend", mode].samples.append(await backend_round(root, path, data, mode))
                series["service", mode].samples.append(await service_round(root, path, data, mode))
        for kind in ("backend", "service"):
            raw = series[kind, "none"]
            for mode in MODES:
                current = series[kind, mode]
                medians[f"{kind}/{mode}"] = current.median
                note = f"{events:,} events, {len(logs[mode][2]):,} bytes"
                rows.append(row(current, raw if mode == "zstd" else None, note=note))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows, {"events": events, "median_seconds": medians, "goal": "raw <= 1 s; zstd <= 2x raw"}


def main() -> None:
    rows, extra = anyio.run(measure)
    report(
        "p5_cold_load",
        "cold load + repair of a 100k-event JSONL log (ratio: zstd / raw)",
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
