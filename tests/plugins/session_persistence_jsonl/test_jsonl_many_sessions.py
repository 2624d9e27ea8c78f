"""R7: many live sessions appending and flushing concurrently through the whole stack."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.session
import plugins.session_persistence_jsonl
from framework import Context

pytestmark = pytest.mark.anyio

SESSIONS = 100
TURNS = 4


async def mount(root: Path, ctx: Context) -> None:
    await ctx.plugin(plugins.session)
    await ctx.plugin(
        plugins.session_persistence_jsonl,
        {"root": str(root), "compression": "none", "write_batch_max_delay_ms": 1},
    )


async def drive(ctx: Context, session: Any, rng: random.Random) -> None:
    """Turns whose events are flushed by several concurrent checkpoints, like parallel tools."""
    for turn in range(1, TURNS + 1):
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})

        async def tool(call: int, turn: int = turn) -> None:
            session.append(
                "tool/call",
                {
                    "turn": turn,
                    "step": 1,
                    "callId": f"c{turn}-{call}",
                    "name": "t",
                    "arguments": "{}",
                },
            )
            await ctx.sessions.flush(session)
            await anyio.sleep(rng.random() / 1000)

        async with anyio.create_task_group() as group:
            for call in range(3):
                group.start_soon(tool, call)
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        if rng.random() < 0.5:
            await ctx.sessions.flush(session)


async def test_r7_hundred_sessions_keep_every_seq_exactly_once(tmp_path: Path) -> None:
    rng = random.Random(7)
    live: dict[str, list[dict[str, Any]]] = {}
    async with Context() as ctx:
        await mount(tmp_path, ctx)
        sessions = [
            ctx.sessions.create(f"many-{n}", meta={"cwd": f"/work/p{n % 5}"})
            for n in range(SESSIONS)
        ]
        async with anyio.create_task_group() as group:
            for session in sessions:
                group.start_soon(drive, ctx, session, random.Random(rng.random()))
        for session in sessions:
            await ctx.sessions.flush(session)
            live[session.id] = list(session.events)

    async with Context() as ctx:
        await mount(tmp_path, ctx)
        stored = await ctx.sessionPersistence.list()
        assert sorted(h["id"] for h in stored) == sorted(live)
        for session_id, events in live.items():
            log = await ctx.sessionPersistence.inspect(session_id)
            assert [e["seq"] for e in log.events] == list(range(len(events)))
            assert log.events == events
