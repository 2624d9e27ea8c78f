"""P4: batch write throughput of the JSONL backend for chunk-heavy logs (packed rows on).

A synthetic agent log of ~100k events (turns of five steps; each step streams 40 reasoning, 60
text and 20 tool-call deltas, then a message, a tool call and its result) is persisted through
`JsonlBackend.append_batch` into a fresh directory, one durable batch (one fsync) per step, per
turn, or per 5000 events, raw and zstd. The figure is events persisted per second; the goal is
≥ 100k events/s raw. For scale, the physical floor (`os.write` + `os.fsync` of the same encoded
bytes, batch by batch) is measured alongside.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.harness import Row, Series, report, row
from plugins.session_persistence_jsonl import JsonlBackend

EVENTS = 100_000
ROUNDS = 3
META: dict[str, Any] = {"version": 0, "id": "bench", "createdAt": 1, "cwd": "/bench"}

Event = dict[str, Any]


def _step(seq: int, time_ms: int, turn: int, step: int) -> tuple[list[Event], int, int]:
    out: list[Event] = []

    def add(kind: str, data: dict[str, Any], **extra: Any) -> None:
        nonlocal seq, time_ms
        out.append({"type": kind, "seq": seq, "time": time_ms, "data": data, **extra})
        seq += 1
        time_ms += 3

    def chunk(body: dict[str, Any]) -> None:
        add("assistant/chunk", {"turn": turn, "step": step, "chunk": body})

    call = f"call-{turn}-{step}"
    add("step/start", {"turn": turn, "step": step})
    chunk({"type": "block-start", "index": 0, "blockType": "reasoning"})
    for i in range(40):
        chunk({"type": "reasoning-delta", "index": 0, "text": f" thought {i}"})
    chunk({"type": "block-start", "index": 1, "blockType": "text"})
    for i in range(60):
        chunk({"type": "text-delta", "index": 1, "text": f" word{i}"})
    chunk({"type": "block-start", "index": 2, "blockType": "tool-call"})
    for i in range(20):
        chunk(
            {
                "type": "tool-call-delta",
                "index": 2,
                "id": call,
                "name": "read",
                "argumentsDelta": f"a{i}",
            }
        )
    chunk({"type": "usage", "usage": {"inputTokens": 1200, "outputTokens": 120}})
    chunk({"type": "finish", "reason": {"kind": "tool-calls"}})
    message = {
        "id": f"m-{turn}-{step}",
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "thought " * 40},
            {"type": "text", "text": "word " * 60},
            {"type": "tool-call", "id": call, "name": "read", "arguments": '{"path":"a.txt"}'},
        ],
        "source": {"kind": "model", "provider": "bench", "model": "m"},
    }
    add(
        "assistant/message",
        {"turn": turn, "step": step, "message": message},
        sourceEventSeqs=[],
        surfaceOp="append",
    )
    add(
        "tool/call", {"turn": turn, "step": step, "callId": call, "name": "read", "arguments": "{}"}
    )
    result = {
        "id": f"r-{turn}-{step}",
        "role": "user",
        "source": {"kind": "tool", "callId": call},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call,
                "content": [{"type": "text", "text": "z" * 400}],
            }
        ],
    }
    add("tool/result", {"turn": turn, "step": step, "message": result}, surfaceOp="append")
    add("step/end", {"turn": turn, "step": step})
    return out, seq, time_ms


def chunk_heavy_steps(events: int, *, open_last_turn: bool = False) -> list[list[Event]]:
    """About `events` events as step-sized groups (turn/start and turn/end join their steps).

    With `open_last_turn`, the last turn stops inside its last step (no step/end, turn/end).
    """
    steps: list[list[Event]] = []
    seq, time_ms, turn = 0, 1_700_000_000_000, 0
    while seq < events:
        turn += 1
        opening: list[Event] = [
            {"type": "turn/start", "seq": seq, "time": time_ms, "data": {"turn": turn}}
        ]
        seq += 1
        for step in range(1, 6):
            group, seq, time_ms = _step(seq, time_ms, turn, step)
            steps.append(opening + group)
            opening = []
        steps[-1].append(
            {
                "type": "turn/end",
                "seq": seq,
                "time": time_ms,
                "data": {"turn": turn, "reason": {"kind": "completed"}},
            }
        )
        seq += 1
    if open_last_turn:
        steps[-1] = steps[-1][:-2]
    return steps


def batches_of(steps: list[list[Event]], kind: str) -> list[list[Event]]:
    """Regroup into durable batches: one per step, per turn (5 steps), or per 5000 events."""
    flat = [event for step in steps for event in step]
    if kind == "step":
        return steps
    if kind == "turn":
        return [
            [event for step in steps[i : i + 5] for event in step] for i in range(0, len(steps), 5)
        ]
    return [flat[i : i + 5000] for i in range(0, len(flat), 5000)]


async def persist(root: Path, mode: str, batches: list[list[Event]]) -> float:
    """Seconds to persist every batch into a fresh log, as its live owner (lock held)."""
    backend = JsonlBackend(root, compression=mode)  # type: ignore[arg-type]
    await backend.acquire_writer(META["id"])
    start = time.perf_counter()
    for index, batch in enumerate(batches):
        await backend.append_batch(META, batch, is_materialized=index > 0)
    elapsed = time.perf_counter() - start
    await backend.aclose()
    return elapsed


def floor(root: Path, payloads: list[bytes]) -> float:
    """Seconds for `os.write` + `os.fsync` of the same bytes, batch by batch."""
    path = root / "floor.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    start = time.perf_counter()
    for payload in payloads:
        os.write(fd, payload)
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


async def measure() -> tuple[list[Row], dict[str, object]]:
    steps = chunk_heavy_steps(EVENTS)
    total = sum(len(step) for step in steps)
    rows: list[Row] = []
    rates: dict[str, float] = {}
    base = Path(tempfile.mkdtemp(prefix="dsh-p4-", dir=os.environ.get("DSH_BENCH_DIR")))
    try:
        for kind in ("step", "turn", "5000"):
            batches = batches_of(steps, kind)
            series = {
                mode: Series(f"{mode} · batch per {kind} ({len(batches)} batches)")
                for mode in ("none", "zstd")
            }
            physical = Series(f"floor write+fsync · batch per {kind}")
            for round_no in range(ROUNDS):
                for mode in ("none", "zstd"):
                    root = base / f"{kind}-{mode}-{round_no}"
                    series[mode].samples.append(await persist(root, mode, batches) / total)
                    if mode == "none":
                        raw = await JsonlBackend(root, compression=mode).read_raw(META["id"])
                        payloads = raw.split(b"\n")
                    shutil.rmtree(root)
                per_batch = _split_payloads(payloads, batches)
                physical.samples.append(floor(base, per_batch) / total)
                (base / "floor.bin").unlink()
            for mode in ("none", "zstd"):
                rate = 1 / series[mode].median
                rates[f"{mode}/{kind}"] = rate
                rows.append(row(series[mode], physical, note=f"{rate:,.0f} events/s"))
            rows.append(row(physical, note=f"{1 / physical.median:,.0f} events/s"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows, {"events": total, "events_per_second": rates, "goal": "raw >= 100k events/s"}


def _split_payloads(lines: list[bytes], batches: list[list[Event]]) -> list[bytes]:
    """Cut a raw log's record lines back into per-batch payloads (by decoded event counts)."""
    from plugins.session.jsonutil import loads
    from plugins.session_persistence.packing import decode_record

    payloads: list[bytes] = [lines[0] + b"\n"]
    index = 1
    for batch in batches:
        need = len(batch)
        chunk: list[bytes] = []
        while need > 0:
            line = lines[index]
            index += 1
            chunk.append(line + b"\n")
            need -= len(decode_record(loads(line)))
        payloads.append(b"".join(chunk))
    return payloads


def main() -> None:
    rows, extra = anyio.run(measure)
    report(
        "p4_throughput",
        "JSONL batch write throughput, chunk-heavy log, packed rows on (µs per event)",
        rows,
        extra,
    )


if __name__ == "__main__":
    main()
