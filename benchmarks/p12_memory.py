"""P12: memory. Resident memory of one process holding 1000 idle live sessions of 100 events
each, and the peak memory of loading a 100 MB log.

Each figure comes from a fresh child process (`python -m benchmarks.p12_memory --child ...`)
reading its own `/proc/self/status` (Linux): `VmRSS` once the stack is booted, then `VmRSS` with
the sessions live and idle (every event flushed) or `VmHWM` (the peak) after
`sessionPersistence.load` of the log. Goals: ≤ 200 MB for the 1000 sessions (the whole process);
a load's peak increase ≤ 2× the log's size.

The idle sessions live on JSONL raw; each holds 100 events: the seed's end and one turn (a user
message, a streamed answer of 93 chunks, the assembled message). The logs are the P4 step shape
(reasoning, text and tool-call chunks, a tool result, packed rows) written turn by turn in raw
JSONL until they reach their size: a 100 MB log whose tool results are 16 KiB each (the bulk of a
long agent session), and a 20 MB chunk-heavy one (400-byte results, so mostly small chunk events;
the ratio does not depend on the size, and at 100 MB this shape alone would hold ~3M events).
A loaded log keeps its events as the records read and decodes them on access
(docs/event-log.md), so its peak is about the log's bytes plus a small index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

import plugins.session
import plugins.session_persistence_jsonl as jsonl
from benchmarks.harness import RESULTS, machine
from benchmarks.p4_throughput import META, batches_of, chunk_heavy_steps
from framework import Context
from plugins.session_persistence_jsonl import JsonlBackend

SESSIONS = 1000
EVENTS = 100
MB = 1024 * 1024
#: A log shape: name, target size, bytes of each tool result's text.
Shape = tuple[str, int, int]
SHAPES: tuple[Shape, ...] = (
    ("tool-output-heavy", 100 * MB, 16 * 1024),
    ("chunk-heavy", 20 * MB, 400),
)


def status() -> dict[str, int]:
    """`VmRSS` and `VmHWM` of this process, in bytes."""
    found: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as lines:
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found


def _idle_turn(session: Any, chunks: int) -> None:
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    message = {
        "id": f"u-{session.id}",
        "role": "user",
        "content": [{"type": "text", "text": "Summarise the log, please."}],
        "source": {"kind": "user"},
    }
    session.append("user/message", message, surface_op="append")
    for index in range(chunks):
        chunk = {"type": "text-delta", "index": 0, "text": f" word{index}"}
        session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
    answer = {
        "id": f"a-{session.id}",
        "role": "assistant",
        "content": [{"type": "text", "text": "".join(f" word{i}" for i in range(chunks))}],
        "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
    }
    data = {"turn": 1, "step": 1, "message": answer}
    session.append("assistant/message", data, surface_op="append")
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


async def idle_child(root: str, sessions: int, events: int) -> dict[str, Any]:
    """Boot, then hold `sessions` live sessions of `events` events each, all flushed."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": root, "compression": "none"})
        before = status()
        held = []
        for index in range(sessions):
            session = ctx.sessions.create(f"idle-{index:04d}", seed=[], meta={"cwd": "/bench"})
            _idle_turn(session, events - len(session.events) - 6)
            await ctx.sessions.flush(session)
            held.append(session)
        after = status()
        counted = {len(session.events) for session in held}
    return {"before": before, "after": after, "events": sorted(counted)}


async def load_child(root: str, session_id: str) -> dict[str, Any]:
    """Boot, then load (and repair) one stored log."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": root, "compression": "none"})
        before = status()
        log = await ctx.sessionPersistence.load(session_id)
        after = status()
        events = len(log.events)
    return {"before": before, "after": after, "events": events}


def _steps(events: int, result_bytes: int) -> list[list[dict[str, Any]]]:
    """The P4 chunk-heavy steps with each tool result's text `result_bytes` long."""
    steps = chunk_heavy_steps(events)
    for step in steps:
        for event in step:
            if event["type"] == "tool/result":
                event["data"]["message"]["content"][0]["content"][0]["text"] = "z" * result_bytes
    return steps


async def _write(
    root: Path, steps: list[list[dict[str, Any]]], target: int | None
) -> tuple[int, int]:
    """Write `steps` turn by turn (stopping once the log reaches `target` bytes)."""
    backend = JsonlBackend(root, compression="none")
    written = 0
    try:
        await backend.acquire_writer(META["id"])
        path = anyio.Path(backend.locate(META).path)
        for index, batch in enumerate(batches_of(steps, "turn")):
            await backend.append_batch(META, batch, is_materialized=index > 0)
            written += len(batch)
            if target is not None and (await path.stat()).st_size >= target:
                break
        size = (await path.stat()).st_size
    finally:
        await backend.aclose()
    return size, written


async def build_log(root: Path, target: int, result_bytes: int) -> tuple[int, int]:
    """A raw log of about `target` bytes (whole turns); return (bytes, events)."""
    probe_size, probe_events = await _write(root / "probe", _steps(5_000, result_bytes), None)
    estimate = int(target / (probe_size / probe_events) * 1.05)
    return await _write(root / "log", _steps(estimate, result_bytes), target)


def child(*args: str) -> dict[str, Any]:
    """Run one measuring child and return what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.p12_memory", "--child", *args],
        capture_output=True,
        check=False,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"p12 child {args[0]} exited {done.returncode}: {done.stderr[-800:]}")
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def measure(
    sessions: int = SESSIONS, events: int = EVENTS, shapes: tuple[Shape, ...] = SHAPES
) -> dict[str, Any]:
    """The idle-sessions child, then per log shape its build and its load child."""
    base = Path(tempfile.mkdtemp(prefix="dsh-p12-", dir=os.environ.get("DSH_BENCH_DIR")))
    try:
        idle = child("idle", str(base / "idle"), str(sessions), str(events))
        loads = []
        for name, target, result_bytes in shapes:
            root = base / name
            size, written = anyio.run(build_log, root, target, result_bytes)
            loaded = child("load", str(root / "log"), META["id"])
            assert loaded["events"] == written, (loaded["events"], written)
            peak = loaded["after"]["VmHWM"] - loaded["before"]["VmRSS"]
            loads.append(
                {
                    "shape": name,
                    "tool_result_bytes": result_bytes,
                    "log_mb": size / MB,
                    "log_events": written,
                    "peak_increase_mb": peak / MB,
                    "process_peak_mb": loaded["after"]["VmHWM"] / MB,
                    "resident_after_mb": (loaded["after"]["VmRSS"] - loaded["before"]["VmRSS"])
                    / MB,
                    "ratio": peak / size,
                }
            )
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {
        "idle_rss_mb": idle["after"]["VmRSS"] / MB,
        "idle_sessions_mb": (idle["after"]["VmRSS"] - idle["before"]["VmRSS"]) / MB,
        "idle_events": idle["events"],
        "loads": loads,
    }


def main() -> None:
    found = measure()
    print("\np12_memory: memory of idle live sessions and of loading a large log")
    print(
        f"{SESSIONS} idle live sessions × {EVENTS} events: {found['idle_rss_mb']:.1f} MB "
        f"resident (the sessions' share {found['idle_sessions_mb']:.1f} MB); goal ≤ 200 MB"
    )
    for load in found["loads"]:
        print(
            f"load of a {load['log_mb']:.0f} MB {load['shape']} log ({load['log_events']:,} "
            f"events): peak increase {load['peak_increase_mb']:.1f} MB = {load['ratio']:.2f}× "
            "the log; goal ≤ 2×"
        )
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": "p12_memory",
        "title": "memory: 1000 idle live sessions; peak of loading a large log",
        "machine": machine(),
        "sessions": SESSIONS,
        "events_per_session": EVENTS,
        **found,
    }
    (RESULTS / "p12_memory.json").write_text(json.dumps(payload, indent=2) + "\n")


def _child_main(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "idle":
        found = anyio.run(idle_child, rest[0], int(rest[1]), int(rest[2]))
    else:
        found = anyio.run(load_child, rest[0], rest[1])
    print(json.dumps(found))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child_main(sys.argv[2:])
    else:
        main()
