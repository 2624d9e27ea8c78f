"""A child process for the PostgreSQL backend tests: `python pg_child.py <mode> <dsn> <schema>
<arg>`.

- `hold <session id>`: take the session's writer lock, write a first batch, print `ready`, sleep
  until killed.
- `load <prefix>`: mount the plugin, then drive `SESSIONS` live sessions `<prefix>-<n>`
  concurrently, each appending `ROUNDS` complete turns with concurrent flushes; print one JSON
  line `{session id: event count}`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session_persistence_postgres import PostgresBackend

SESSIONS = 4
ROUNDS = 30
FLUSHERS = 3


async def hold(dsn: str, schema: str, session_id: str) -> None:
    backend = PostgresBackend(dsn, schema=schema)
    await backend.acquire_writer(session_id)
    meta = {"version": 0, "id": session_id, "createdAt": 1, "cwd": "/w"}
    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1}},
    ]
    await backend.append_batch(meta, events, is_materialized=False)
    print("ready", flush=True)
    await anyio.sleep_forever()


async def drive(ctx: Context, session: Any) -> None:
    """Append complete turns; after each delta, several concurrent flushes (group commit)."""
    for turn in range(1, ROUNDS + 1):
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        async with anyio.create_task_group() as group:
            for k in range(FLUSHERS):
                chunk = {"type": "text-delta", "index": 0, "text": f"t{turn}.{k}"}
                session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk})
                group.start_soon(ctx.sessions.flush, session)
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        if turn % 2:
            await ctx.sessions.flush(session)
        else:
            await anyio.sleep(0.002)  # leave this one to the background write


async def load(dsn: str, schema: str, prefix: str) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, {"dsn": dsn, "schema": schema, "writeBatchMaxDelayMs": 5})
        sessions = [
            ctx.sessions.create(f"{prefix}-{n}", meta={"cwd": "/w"}) for n in range(SESSIONS)
        ]
        async with anyio.create_task_group() as group:
            for session in sessions:
                group.start_soon(drive, ctx, session)
        for session in sessions:
            await ctx.sessions.flush(session)
        counts = {session.id: len(session.events) for session in sessions}
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    mode, dsn, schema, arg = sys.argv[1:5]
    if mode == "hold":
        anyio.run(hold, dsn, schema, arg, backend="asyncio")
    elif mode == "load":
        anyio.run(load, dsn, schema, arg, backend="asyncio")
    else:
        raise SystemExit(f"unknown mode {mode!r}")
