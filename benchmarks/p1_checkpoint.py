"""P1: checkpoint cost vs the physical floor (goal ≤ 1.25×).

A live session on JSONL raw receives a typical step batch of 1, 5 or 20 events (~2 KB of JSONL)
and `await ctx.sessions.flush(session)` is timed. The floor is `os.write` + `os.fsync` of the
very bytes that flush appended (read back from the log), to another file on the same disk. A
second baseline performs the same write+fsync through `anyio.to_thread.run_sync` from the event
loop: a flush must not block the loop on fsync, so that worker-thread round trip is part of any
checkpoint, and the ratio to it is our own overhead. The cases alternate round by round in one
run; the ratios are of the medians (vs the bare syscalls: the spec's bar).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

import plugins.session as session_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
from benchmarks.harness import Row, Series, report, row
from framework import Context
from plugins.session import Session

ROUNDS = 300
WARMUP = 20
SIZES = (1, 5, 20)
TARGET_BYTES = 2048


def _text(size: int) -> str:
    return ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


def _step(session: Session, turn: int, step: int, count: int) -> None:
    """Append a step batch of `count` events, ~`TARGET_BYTES` of JSONL in all."""
    if count == 1:
        message = {
            "id": f"u-{session.seq}",
            "role": "user",
            "content": [{"type": "text", "text": _text(TARGET_BYTES - 180)}],
            "source": {"kind": "user"},
        }
        session.append("user/message", message, surface_op="append")
        return
    session.append("step/start", {"turn": turn, "step": step})
    deltas = count - 3
    for _ in range(deltas):
        chunk = {"type": "text-delta", "index": 0, "text": _text(60)}
        session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
    body = TARGET_BYTES - 250 - deltas * 130
    message = {
        "id": f"a-{session.seq}",
        "role": "assistant",
        "content": [{"type": "text", "text": _text(max(body, 64))}],
        "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
    }
    data = {"turn": turn, "step": step, "message": message}
    session.append("assistant/message", data, surface_op="append")
    session.append("step/end", {"turn": turn, "step": step})


def _write_and_sync(fd: int, data: bytes) -> None:
    os.write(fd, data)
    os.fsync(fd)


async def measure(
    rounds: int = ROUNDS, warmup: int = WARMUP
) -> dict[int, tuple[Series, Series, Series]]:
    """Per batch size: (flush, write+fsync, write+fsync in a worker thread) series."""
    found = {
        n: (
            Series(f"flush · {n} event(s)"),
            Series(f"write+fsync · {n} event(s)"),
            Series(f"to_thread(write+fsync) · {n} event(s)"),
        )
        for n in SIZES
    }
    base = Path(tempfile.mkdtemp(prefix="dsh-p1-", dir=os.environ.get("DSH_BENCH_DIR")))
    floor_fd = os.open(base / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        async with Context() as ctx:
            await ctx.plugin(session_plugin)
            await ctx.plugin(jsonl_plugin, {"root": str(base / "sessions"), "compression": "none"})
            sessions: dict[int, Any] = {}
            for n in SIZES:
                session = ctx.sessions.create(f"p1-{n}", seed=[], meta={"cwd": "/bench"})
                session.append("turn/start", {"turn": 1})
                await ctx.sessions.flush(session)
                sessions[n] = session
            logs = {
                n: Path(ctx.sessionPersistence.locate(dict(s.header)).path)
                for n, s in sessions.items()
            }
            for index in range(warmup + rounds):
                for n in SIZES:
                    session = sessions[n]
                    size = logs[n].stat().st_size
                    _step(session, 1, index + 1, n)
                    start = time.perf_counter()
                    await ctx.sessions.flush(session)
                    flushed = time.perf_counter() - start
                    with logs[n].open("rb") as log:
                        log.seek(size)
                        data = log.read()
                    start = time.perf_counter()
                    _write_and_sync(floor_fd, data)
                    floor = time.perf_counter() - start
                    start = time.perf_counter()
                    await anyio.to_thread.run_sync(_write_and_sync, floor_fd, data)
                    threaded = time.perf_counter() - start
                    if index >= warmup:
                        found[n][0].samples.append(flushed)
                        found[n][1].samples.append(floor)
                        found[n][2].samples.append(threaded)
    finally:
        os.close(floor_fd)
        shutil.rmtree(base, ignore_errors=True)
    return found


def main() -> None:
    found = anyio.run(measure)
    rows: list[Row] = []
    ratios: dict[str, dict[str, float]] = {}
    for n, (flush, floor, threaded) in found.items():
        rows.append(row(floor, note="physical floor"))
        rows.append(row(threaded, floor, note="floor + worker-thread round trip"))
        rows.append(row(flush, floor, note="goal ≤ 1.25× (vs physical floor)"))
        own = flush.median / threaded.median
        rows[-1].note += f"; {own:.2f}× vs threaded floor (our overhead)"
        ratios[str(n)] = {"vs_floor": flush.median / floor.median, "vs_threaded_floor": own}
    report(
        "p1_checkpoint",
        "checkpoint (sessions.flush, JSONL raw) vs os.write+os.fsync of the same bytes",
        rows,
        {
            "rounds": ROUNDS,
            "sizes": list(SIZES),
            "target_bytes": TARGET_BYTES,
            "ratios": ratios,
        },
    )


if __name__ == "__main__":
    main()
