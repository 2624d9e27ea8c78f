"""P6 (SQLite): per-checkpoint cost at 10, 100 and 1000 prior messages must stay flat.

A live session on the SQLite backend (WAL, synchronous=FULL, in a temporary folder) gets one
typical agent step per round — `step/start`, an `assistant/message` with a tool call,
`tool/call`, `tool/result`, `step/end` (~2 KB) — and the round times the checkpoint,
`await ctx.sessions.flush(session)` (one `BEGIN IMMEDIATE` … `COMMIT`; the in-memory appends
before it are not timed, P3 measures them). The three history sizes alternate round by round;
a session that grew past 1.5× its size is retired and replaced by a fresh one (built untimed).
`p6_postgres_growth` and `p9_langgraph` reuse `Growth` for the same steps.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

import plugins.session
import plugins.session_persistence_sqlite
from benchmarks.harness import Row, Series, report, row
from framework import Context

SIZES = (10, 100, 1000)
ROUNDS = 200
WARMUP = 10
TEXT = "The quick brown fox jumps over the lazy dog. " * 6  # ~270 characters


def user_message(k: int) -> dict[str, Any]:
    return {
        "id": f"u-{k}",
        "role": "user",
        "content": [{"type": "text", "text": f"Question {k}: {TEXT}"}],
        "source": {"kind": "user"},
    }


def assistant_message(k: int, call_id: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"Answer {k}: {TEXT}"}]
    if call_id is not None:
        arguments = f'{{"path":"src/module_{k}.py","pattern":"def handler"}}'
        content.append({"type": "tool-call", "id": call_id, "name": "grep", "arguments": arguments})
    return {
        "id": f"a-{k}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "replay", "model": "bench-model"},
    }


def tool_message(k: int, call_id: str) -> dict[str, Any]:
    result = f"src/module_{k}.py:12: def handler(request): {TEXT}"
    return {
        "id": f"t-{k}",
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": result}],
            }
        ],
        "source": {"kind": "tool", "callId": call_id},
    }


class Workload:
    """One live session inside one open turn; `messages` counts its model-visible messages."""

    def __init__(self, ctx: Context, session_id: str) -> None:
        self.session = ctx.sessions.create(session_id, meta={"cwd": "/bench/project"})
        self.messages: list[dict[str, Any]] = []
        self.step = 0
        self.session.append("turn/start", {"turn": 1})

    def prefill(self, count: int) -> None:
        """`count` prior messages: alternating user questions and plain answers."""
        for k in range(count):
            if k % 2 == 0:
                message = user_message(k)
                self.session.append("user/message", message, surface_op="append")
            else:
                self.step += 1
                message = assistant_message(k)
                self.session.append("step/start", {"turn": 1, "step": self.step})
                self.session.append(
                    "assistant/message",
                    {"turn": 1, "step": self.step, "message": message},
                    surface_op="append",
                    source_event_seqs=[],
                )
                self.session.append("step/end", {"turn": 1, "step": self.step})
            self.messages.append(message)

    def step_batch(self) -> list[dict[str, Any]]:
        """Append one tool-calling step (5 events, ~2 KB); returns its two new messages."""
        self.step += 1
        step, k = self.step, len(self.messages)
        call_id = f"call-{step}"
        append = self.session.append
        answer = assistant_message(k, call_id)
        result = tool_message(k + 1, call_id)
        append("step/start", {"turn": 1, "step": step})
        append(
            "assistant/message",
            {"turn": 1, "step": step, "message": answer},
            surface_op="append",
            source_event_seqs=[],
        )
        call = append(
            "tool/call",
            {
                "turn": 1,
                "step": step,
                "callId": call_id,
                "name": "grep",
                "arguments": {"path": f"src/module_{k}.py"},
            },
        )
        append(
            "tool/result",
            {"turn": 1, "step": step, "message": result},
            surface_op="append",
            source_event_seqs=[call["seq"]],
        )
        append("step/end", {"turn": 1, "step": step})
        self.messages += [answer, result]
        return [answer, result]


@asynccontextmanager
async def sqlite_stack(
    directory: Path, name: str = "sessions", inline_write_max_ms: float = 0.0
) -> AsyncIterator[Context]:
    """Sessions persisted by the SQLite backend in `directory/<name>.sqlite3` (WAL,
    synchronous=FULL), with the given `inlineWriteMaxMs`."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        config = {
            "path": str(directory / f"{name}.sqlite3"),
            "inlineWriteMaxMs": inline_write_max_ms,
        }
        await ctx.plugin(plugins.session_persistence_sqlite, config)
        yield ctx


class Growth:
    """Sessions of one nominal history size, replaced when they outgrow it by half; `backend`
    names the persistence backend mounted on `ctx` in the series name."""

    def __init__(self, ctx: Context, size: int, backend: str = "sqlite", mode: str = "") -> None:
        self.ctx = ctx
        self.size = size
        self.series = Series(f"{backend} checkpoint{mode}, {size} prior messages")
        self.fresh_count = 0
        self.workload: Workload | None = None

    async def fresh(self) -> Workload:
        if self.workload is not None:
            # Retire the outgrown session (waiting for it): one live session per size, so a
            # stack of its own may use the inline gate (`p9_langgraph`).
            done = self.workload.session
            self.ctx.sessions.dispose(done)
            await self.ctx.sessionPersistence.load(done.id)
        self.fresh_count += 1
        workload = Workload(self.ctx, f"p6-{self.size}-{self.fresh_count}")
        workload.prefill(self.size)
        await self.ctx.sessions.flush(workload.session)
        self.workload = workload
        return workload

    async def checkpoint(self, *, record: bool = True) -> None:
        workload = self.workload
        if workload is None or len(workload.messages) > self.size * 3 // 2:
            workload = await self.fresh()
        workload.step_batch()
        start = time.perf_counter()
        await self.ctx.sessions.flush(workload.session)
        if record:
            self.series.samples.append(time.perf_counter() - start)


class Floor:
    """The physical floor on the same disk: `os.write` + `os.fsync` of 2 KB appended to a file."""

    def __init__(self, directory: Path) -> None:
        self.series = Series("floor: write+fsync 2 KB")
        self.fd = os.open(directory / "floor.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def checkpoint(self, *, record: bool = True) -> None:
        start = time.perf_counter()
        os.write(self.fd, b"x" * 2048)
        os.fsync(self.fd)
        if record:
            self.series.samples.append(time.perf_counter() - start)


async def measure(rounds: int = ROUNDS, warmup: int = WARMUP) -> list[Series]:
    """Alternate the three sizes and the floor round by round; one series each (floor last)."""
    with tempfile.TemporaryDirectory(prefix="dsh-p6-") as directory:
        os.chmod(directory, 0o700)
        floor = Floor(Path(directory))
        try:
            async with sqlite_stack(Path(directory)) as ctx:
                cases: list[Growth | Floor] = [Growth(ctx, size) for size in SIZES]
                cases.append(floor)
                for record, count in ((False, warmup), (True, rounds)):
                    for _ in range(count):
                        for case in cases:
                            await case.checkpoint(record=record)
        finally:
            os.close(floor.fd)
    return [case.series for case in cases]


def main(rounds: int = ROUNDS) -> list[Row]:
    *series, floor = anyio.run(measure, rounds)
    base = series[0]
    rows = [
        row(s, base, f"ratio to 10 messages; {s.median / floor.median:.1f}x floor") for s in series
    ]
    rows.append(row(floor, base, "the same disk's write+fsync"))
    report(
        "p6_sqlite_growth",
        "SQLite per-checkpoint latency (one ~2 KB step, flushed) vs prior messages; goal: flat",
        rows,
        {"sizes": list(SIZES), "rounds": rounds, "journal_mode": "wal", "synchronous": "FULL"},
    )
    return rows


if __name__ == "__main__":
    main()
