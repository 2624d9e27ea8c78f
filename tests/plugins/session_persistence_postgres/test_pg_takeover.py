"""R13 under the policy on PostgreSQL: the lock connection is terminated while another writer
waits for the lock; the owner notices by itself and stops before its next model request and
tool body, saying so."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import psycopg
import pytest
from pg_helpers import execute, until
from policy_probe import probe_stack
from postgres_support import PostgresTarget

import plugins.session_persistence_postgres as pg
from framework import AbortController, Context
from plugins.llm import GenerateOptions
from plugins.session_persistence import mount_persistence
from plugins.session_persistence.errors import WriterLockLostError
from plugins.session_persistence_postgres import PostgresBackend, lock_key
from plugins.tools import ToolExecutionInput

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_a_lost_lock_stops_the_next_request_and_tool_body(postgres: PostgresTarget) -> None:
    ran: list[str] = []
    backend = PostgresBackend(postgres.dsn, schema=postgres.schema)

    async def persistence(ctx: Context, _config: object) -> Any:
        config = pg.Config(dsn=postgres.dsn, schema=postgres.schema, writeBatchMaxDelayMs=60_000)
        return await mount_persistence(ctx, backend, config)

    async with probe_stack(persistence, ran) as ctx:
        session = ctx.sessions.create("owned", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        key = lock_key("owned")
        async with await psycopg.AsyncConnection.connect(postgres.dsn, autocommit=True) as thief:
            async with anyio.create_task_group() as group:
                group.start_soon(thief.execute, "SELECT pg_advisory_lock(%s)", (key,))
                waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted"
                await until(lambda: execute(postgres, waiting) == [(1,)], "the thief waits")
                execute(postgres, "SELECT pg_terminate_backend(%s)", backend._lock_pid)
            # Noticed by the owner itself, before any write of its own:
            await until(lambda: "owned" in backend._lost, "the owner noticed")

            session.append("step/start", {"turn": 1, "step": 1})
            options = GenerateOptions(provider="probe", model="m", messages=[], session_id="owned")
            with pytest.raises(WriterLockLostError, match='session "owned" lost its writer lock'):
                async for _ in ctx.llm.stream(options):
                    pass
            agent = SimpleNamespace(ctx=ctx, session=session)
            call = ToolExecutionInput(
                call_id="c1",
                name="probe",
                arguments={},
                signal=AbortController().signal,
                agent=agent,
            )
            result = await ctx.tools.execute(call)
            assert result.is_error is True
            assert "lost its writer lock to another writer" in result.content[0]["text"]
            assert ran == []
            assert execute(postgres, "SELECT next_seq FROM dsh_sessions") == [(1,)]
