"""The tool-mode hard crash (docs/checkpoint-policy.md) on the SQLite and PostgreSQL backends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crash import (
    SESSION_ID,
    Backend,
    assert_resumed_turn_runs,
    assert_tool_mode_repair,
    crash,
    reopened,
)
from postgres_support import fresh_schema, require_postgres

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only"),
]


async def check_tool_mode(tmp_path: Path, backend: Backend) -> None:
    crash(tmp_path, "tool", backend=backend)
    async with reopened(backend, [{"text": "verified first"}]) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
        assert_tool_mode_repair(log.events)
        await assert_resumed_turn_runs(ctx, len(log.events))


async def test_tool_mode_crash_on_sqlite(tmp_path: Path) -> None:
    await check_tool_mode(tmp_path, Backend("sqlite", {"path": str(tmp_path / "s.sqlite3")}))


@pytest.mark.postgres
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async driver is asyncio-only
async def test_tool_mode_crash_on_postgres(tmp_path: Path) -> None:
    dsn = require_postgres()
    with fresh_schema() as schema:
        await check_tool_mode(tmp_path, Backend("postgres", {"dsn": dsn, "schema": schema}))
