"""A write whose reply is lost (docs/persistence.md, PostgreSQL): the connection breaks after
the server committed the group statement and before its answer arrived. If exactly this
writer's batch is stored, the flush succeeds; anything else stays an error. The faults are made
by a TCP proxy in front of the real server (`reply_proxy.py`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from pg_helpers import backend, event, execute, meta, turn
from postgres_support import PostgresTarget
from reply_proxy import ReplyProxy

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import SessionPersistenceError, StaleWriterError
from plugins.session_persistence_postgres import PostgresBackend
from plugins.session_persistence_postgres.connection import DatabaseError

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

MARKER = "lost-reply-marker-5f1c"


@asynccontextmanager
async def through_proxy(postgres: PostgresTarget) -> AsyncIterator[tuple[Context, ReplyProxy]]:
    async with ReplyProxy(postgres.dsn) as proxy, Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, {"dsn": proxy.dsn_through(), "schema": postgres.schema})
        yield ctx, proxy


async def stored_texts(postgres: PostgresTarget, session_id: str) -> list[str]:
    stored = await backend(postgres).load_stored(session_id)
    assert stored is not None
    return [dumps(event) for event in stored.events]


def next_seq(postgres: PostgresTarget, session_id: str) -> int:
    ((value,),) = execute(postgres, "SELECT next_seq FROM dsh_sessions WHERE id = %s", session_id)
    number: int = value
    return number


async def test_a_committed_batch_whose_reply_was_lost_is_a_success(
    postgres: PostgresTarget,
) -> None:
    async with through_proxy(postgres) as (ctx, proxy):
        session = ctx.sessions.create("s", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        proxy.lose_reply(MARKER)
        session.append("step/start", {"turn": 1, "step": 1, "note": MARKER})
        await ctx.sessions.flush(session)  # the batch is stored: this flush is acknowledged
        assert proxy.done.is_set()
        session.append("step/end", {"turn": 1, "step": 1})
        await ctx.sessions.flush(session)  # and the next write continues after it
        expected = [dumps(event) for event in session.events]
    assert await stored_texts(postgres, "s") == expected
    assert next_seq(postgres, "s") == 3


async def test_a_lost_first_batch_is_a_success_when_its_row_is_ours(
    postgres: PostgresTarget,
) -> None:
    async with through_proxy(postgres) as (ctx, proxy):
        session = ctx.sessions.create("first", meta={"cwd": "/w"})
        proxy.lose_reply(MARKER)
        session.append("turn/start", {"turn": 1, "note": MARKER})
        await ctx.sessions.flush(session)
        assert proxy.done.is_set()
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await ctx.sessions.flush(session)
        expected = [dumps(event) for event in session.events]
    assert await stored_texts(postgres, "first") == expected


async def test_a_request_that_never_arrived_fails_and_is_written_by_the_retry(
    postgres: PostgresTarget,
) -> None:
    async with through_proxy(postgres) as (ctx, proxy):
        session = ctx.sessions.create("d", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        proxy.drop_request(MARKER)
        session.append("step/start", {"turn": 1, "step": 1, "note": MARKER})
        with pytest.raises(DatabaseError):
            await ctx.sessions.flush(session)
        assert proxy.done.is_set()
        assert next_seq(postgres, "d") == 1
        await ctx.sessions.flush(session)
        expected = [dumps(event) for event in session.events]
    assert await stored_texts(postgres, "d") == expected


def fail_the_first_check(ctx: Context) -> None:
    """The check after the lost reply cannot read (as if the server were still unreachable)."""
    persistence: Any = ctx.sessionPersistence
    real = persistence.backend._stored_upto
    calls = [0]

    async def stored_upto(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise DatabaseError("injected: the check could not read")
        return await real(*args)

    persistence.backend._stored_upto = stored_upto


async def test_a_retry_after_an_unconfirmed_lost_reply_writes_only_what_is_missing(
    postgres: PostgresTarget,
) -> None:
    async with through_proxy(postgres) as (ctx, proxy):
        session = ctx.sessions.create("r", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        fail_the_first_check(ctx)
        proxy.lose_reply(MARKER)
        session.append("step/start", {"turn": 1, "step": 1, "note": MARKER})
        with pytest.raises(SessionPersistenceError):
            await ctx.sessions.flush(session)  # stored, but nobody could tell
        assert next_seq(postgres, "r") == 2
        # The retry's batch starts with the stored event: it is recognised, not refused as stale.
        session.append("step/end", {"turn": 1, "step": 1})
        await ctx.sessions.flush(session)
        expected = [dumps(event) for event in session.events]
    assert await stored_texts(postgres, "r") == expected
    assert next_seq(postgres, "r") == 3


async def test_rows_that_differ_from_the_batch_stay_a_stale_writer(
    postgres: PostgresTarget,
) -> None:
    async with through_proxy(postgres) as (ctx, proxy):
        session = ctx.sessions.create("x", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        fail_the_first_check(ctx)
        proxy.lose_reply(MARKER)
        session.append("step/start", {"turn": 1, "step": 1, "note": MARKER})
        with pytest.raises(SessionPersistenceError):
            await ctx.sessions.flush(session)
        # What is stored at seq 1 is not this writer's event any more.
        execute(postgres, "UPDATE dsh_events SET data = '{}' WHERE session_id = 'x' AND seq = 1")
        with pytest.raises(StaleWriterError):
            await ctx.sessions.flush(session)


async def test_each_session_of_a_group_whose_reply_was_lost_is_checked_on_its_own(
    postgres: PostgresTarget,
) -> None:
    async with ReplyProxy(postgres.dsn) as proxy:
        store = PostgresBackend(proxy.dsn_through(), schema=postgres.schema)
        try:
            for session_id in ("a", "b", "bad"):
                await store.append_batch(meta(session_id), turn(0), is_materialized=False)
            proxy.lose_reply(MARKER)
            outcomes: dict[str, BaseException | None] = {}

            async def append(session_id: str, seq: int) -> None:
                try:
                    batch = [event(seq, "note", {"n": MARKER})]
                    await store.append_batch(meta(session_id), batch, is_materialized=True)
                    outcomes[session_id] = None
                except SessionPersistenceError as error:
                    outcomes[session_id] = error

            # Submitted together on asyncio: one group, one statement, one lost reply. "bad"
            # skips a seq, so the statement refused its rows while it wrote the others'.
            async with anyio.create_task_group() as group:
                group.start_soon(append, "a", 5)
                group.start_soon(append, "b", 5)
                group.start_soon(append, "bad", 7)
            assert proxy.done.is_set()
        finally:
            await store.aclose()
    assert (outcomes["a"], outcomes["b"]) == (None, None)
    assert isinstance(outcomes["bad"], DatabaseError)
    assert [next_seq(postgres, session_id) for session_id in ("a", "b", "bad")] == [6, 6, 5]
