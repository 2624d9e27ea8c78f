"""P6 (PostgreSQL): per-checkpoint cost at 10, 100 and 1000 prior messages must stay flat.

The workload of `p6_sqlite_growth` (one live session inside one open turn; each round appends
one typical tool-calling step, ~2 KB in 5 events, and times
`await ctx.sessions.flush(session)`), on the PostgreSQL backend: one transaction per flush
(`SELECT ... FOR UPDATE`, the writer-lock check, one multi-row insert, `UPDATE`, COMMIT with
`synchronous_commit = on`). The three history sizes alternate round by round; a session that grew
past 1.5x its size is replaced by a fresh one (built untimed).

Server: `$DSH_POSTGRES_DSN`, else `$DSH_TEST_POSTGRES_DSN`, else
`postgresql://postgres@127.0.0.1:5432/test`; a private schema is created and dropped.
"""

from __future__ import annotations

import os
import secrets

import anyio
import psycopg
from psycopg import sql

import plugins.session
import plugins.session_persistence_postgres
from benchmarks.harness import Row, Series, report, row
from benchmarks.p6_sqlite_growth import SIZES, WARMUP, Growth
from framework import Context
from plugins.session_persistence_postgres.connection import describe, scrub

ROUNDS = 200
DSN = (
    os.environ.get("DSH_POSTGRES_DSN")
    or os.environ.get("DSH_TEST_POSTGRES_DSN")
    or "postgresql://postgres@127.0.0.1:5432/test"
)


async def measure(
    schema: str, rounds: int = ROUNDS, warmup: int = WARMUP, dsn: str = DSN
) -> list[Series]:
    """Alternate the three sizes round by round in `schema` at `dsn`; one series each."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(
            plugins.session_persistence_postgres,
            {"dsn": dsn, "schema": schema, "writeBatchMaxDelayMs": 60_000},
        )
        cases = [Growth(ctx, size, "postgres") for size in SIZES]
        for _ in range(warmup):
            for case in cases:
                await case.checkpoint(record=False)
        for _ in range(rounds):
            for case in cases:
                await case.checkpoint()
    return [case.series for case in cases]


def main(rounds: int = ROUNDS) -> list[Row]:
    try:
        with psycopg.connect(DSN, connect_timeout=3) as conn:
            server = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    except psycopg.Error as error:
        print(f"p6_postgres_growth skipped: {describe(DSN)}: {scrub(str(error), DSN)}")
        return []
    schema = f"dsh_bench_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        series = anyio.run(measure, schema, rounds, backend="asyncio")
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    base = series[0]
    rows = [row(s, base, "ratio to 10 messages") for s in series]
    report(
        "p6_postgres_growth",
        "PostgreSQL per-checkpoint latency (one ~2 KB step, flushed) vs prior messages; goal: flat",
        rows,
        {
            "sizes": list(SIZES),
            "rounds": rounds,
            "server": f"PostgreSQL {server} at {describe(DSN)}",
            "synchronous_commit": "on",
        },
    )
    return rows


if __name__ == "__main__":
    main()
