"""A child process for the PostgreSQL backend tests: `python pg_child.py <mode> <dsn> <schema>
<session id>`.

`hold`: take the session's writer lock, write a first batch, print `ready`, sleep until killed.
"""

from __future__ import annotations

import sys

import anyio

from plugins.session_persistence_postgres import PostgresBackend


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


if __name__ == "__main__":
    mode, dsn, schema, session_id = sys.argv[1:5]
    if mode != "hold":
        raise SystemExit(f"unknown mode {mode!r}")
    anyio.run(hold, dsn, schema, session_id, backend="asyncio")
