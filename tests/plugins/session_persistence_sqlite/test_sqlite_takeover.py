"""R13 under the policy: a live owner whose lock another host took over stops before its next
model request or tool body, says so, and writes nothing more."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from policy_probe import probe_stack

import plugins.session_persistence_sqlite as sqlite_plugin
from framework import AbortController, Context
from plugins.llm import GenerateOptions
from plugins.session_persistence import mount_persistence
from plugins.session_persistence.errors import WriterLockLostError
from plugins.session_persistence_sqlite import SqliteBackend
from plugins.tools import ToolExecutionInput

pytestmark = pytest.mark.anyio


def take_over(database: Path) -> None:
    """What a writer on another host does once the owner's heartbeat is stale."""
    with sqlite3.connect(database, isolation_level=None) as db:
        db.execute("UPDATE session_locks SET token = 'other', pid = 4242, host = 'elsewhere'")
    db.close()


def next_seq(database: Path) -> int:
    with sqlite3.connect(database) as db:
        (value,) = db.execute("SELECT next_seq FROM sessions").fetchone()
    db.close()
    return int(value)


async def test_a_taken_over_owner_stops_before_the_next_request_and_tool_body(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "db"
    folder.mkdir(mode=0o700)
    database = folder / "sessions.sqlite3"
    ran: list[str] = []

    async def persistence(ctx: Context, _config: object) -> Any:
        config = sqlite_plugin.Config(path=str(database), write_batch_max_delay_ms=60_000)
        return await mount_persistence(ctx, SqliteBackend(database), config)

    async with probe_stack(persistence, ran) as ctx:
        session = ctx.sessions.create("owned", meta={"cwd": str(tmp_path)})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        durable = next_seq(database)

        take_over(database)
        session.append("step/start", {"turn": 1, "step": 1})
        options = GenerateOptions(provider="probe", model="m", messages=[], session_id="owned")
        with pytest.raises(WriterLockLostError, match='session "owned" lost its writer lock'):
            async for _ in ctx.llm.stream(options):
                pass
        agent = SimpleNamespace(ctx=ctx, session=session)
        call = ToolExecutionInput(
            call_id="c1", name="probe", arguments={}, signal=AbortController().signal, agent=agent
        )
        result = await ctx.tools.execute(call)
        assert result.is_error is True
        assert (
            "lost its writer lock to another writer (now pid 4242 on host elsewhere)"
            in (result.content[0]["text"])
        )
        assert ran == []  # neither the model request nor the tool body ran
        assert next_seq(database) == durable  # and the taken-over log did not grow
