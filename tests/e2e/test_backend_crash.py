"""The tool-mode hard crash (spec 04 §5 case 13) on the SQLite and PostgreSQL backends."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from crash import (
    REQUEST_PREFIX,
    SESSION_ID,
    UNKNOWN,
    Backend,
    assert_contiguous,
    crash,
    reopened,
    result_text,
    results_by_call,
    types,
)
from postgres_support import fresh_schema, require_postgres

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only"),
]

TOOL_MODE = [
    *REQUEST_PREFIX,
    "assistant/chunk",
    "assistant/chunk",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "step/end",
    "turn/end",
]


async def check_tool_mode(tmp_path: Path, backend: Backend) -> None:
    crash(tmp_path, "tool", backend=backend)
    async with reopened(backend, [{"text": "verified first"}]) as ctx:
        log = await ctx.sessionPersistence.load(SESSION_ID)
        assert types(log.events) == TOOL_MODE
        assert_contiguous(log.events)
        (result,) = results_by_call(log.events)["crash-call"]
        assert result["data"]["error"] == UNKNOWN
        assert result["sourceEventSeqs"] == [11]
        assert "Do not retry blindly." in result_text(result)
        handle = await ctx.agents.resume(SESSION_ID)
        handle.agent.followup("continue")
        await handle.agent.when_idle()
        assert handle.agent.session.events[-1]["data"]["reason"] == {"kind": "completed"}
        await handle.dispose()


async def test_tool_mode_crash_on_sqlite(tmp_path: Path) -> None:
    await check_tool_mode(tmp_path, Backend("sqlite", {"path": str(tmp_path / "s.sqlite3")}))


@pytest.mark.postgres
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async driver is asyncio-only
async def test_tool_mode_crash_on_postgres(tmp_path: Path) -> None:
    dsn = require_postgres()
    with fresh_schema() as schema:
        await check_tool_mode(tmp_path, Backend("postgres", {"dsn": dsn, "schema": schema}))
