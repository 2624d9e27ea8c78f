"""Failed writes (a real failed transaction in the server): the flush raises, the events stay
buffered, a later flush writes them all once, in order; a cancelled flush leaves no partial
batch."""

from __future__ import annotations

import logging

import anyio
import pytest
from pg_helpers import (
    backend,
    execute,
    inject_write_faults,
    meta,
    plant_row_past_next_seq,
    plant_version,
)
from pg_helpers import turn as complete_turn
from postgres_support import PostgresTarget

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


class _OnRecord(logging.Handler):
    """Sets an event when a record is logged (the background write runs on the test's loop)."""

    def __init__(self, event: anyio.Event) -> None:
        super().__init__()
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        self.event.set()


async def test_a_failed_write_keeps_the_events_for_the_next_flush(
    postgres: PostgresTarget, caplog: pytest.LogCaptureFixture
) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        session = ctx.sessions.create("f", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        inject_write_faults(postgres, 1)
        session.append("step/start", {"turn": 1, "step": 1})
        with pytest.raises(SessionPersistenceError, match="injected write fault"):
            await ctx.sessions.flush(session)
        assert execute(postgres, "SELECT count(*) FROM dsh_events") == [(1,)]
        session.append("step/end", {"turn": 1, "step": 1})
        await ctx.sessions.flush(session)
        expected = [dumps(e) for e in session.events]
    stored = await backend(postgres).load_stored("f")
    assert stored is not None
    assert [dumps(e) for e in stored.events] == expected
    assert execute(postgres, "SELECT next_seq, revision FROM dsh_sessions") == [(3, 2)]


async def test_a_background_write_failure_warns_once(
    postgres: PostgresTarget, caplog: pytest.LogCaptureFixture
) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config(writeBatchMaxDelayMs=1))
        session = ctx.sessions.create("bg", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        inject_write_faults(postgres, 1)
        warned = anyio.Event()
        signal = _OnRecord(warned)
        source = logging.getLogger("plugins.session_persistence")
        source.addHandler(signal)
        try:
            with caplog.at_level(logging.WARNING):
                session.append("step/start", {"turn": 1, "step": 1})
                with anyio.fail_after(5):
                    await warned.wait()
        finally:
            source.removeHandler(signal)
        assert len(caplog.records) == 1
        assert (
            caplog.records[0]
            .getMessage()
            .startswith(
                'session-persistence-postgres: background write for session "bg" failed '
                "(buffered events retained): "
            )
        )
        await ctx.sessions.flush(session)
    assert execute(postgres, "SELECT count(*) FROM dsh_events") == [(2,)]


async def test_a_cancelled_flush_leaves_no_partial_batch(postgres: PostgresTarget) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        session = ctx.sessions.create("c", meta={"cwd": "/w"})
        for event in complete_turn(0):
            session.append(event["type"], event["data"])
        with anyio.move_on_after(0):
            await ctx.sessions.flush(session)
        total = len(session.events)
        counts = execute(postgres, "SELECT count(*) FROM dsh_events")
        assert counts in ([(0,)], [(total,)])
        await ctx.sessions.flush(session)
    assert execute(postgres, "SELECT count(*) FROM dsh_events") == [(total,)]


async def test_row_damage_and_version_refusals_reach_the_coordinator(
    postgres: PostgresTarget,
) -> None:
    b = backend(postgres)
    await b.append_batch(meta("t"), complete_turn(0), is_materialized=False)
    await b.append_batch(meta("v"), complete_turn(0), is_materialized=False)
    await b.aclose()
    plant_row_past_next_seq(postgres, "t")
    plant_version(postgres, "v", 1)
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        with pytest.raises(SessionPersistenceCorruptionError, match=r"physical row at seq 5$"):
            await ctx.sessionPersistence.load("t")
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            await ctx.sessionPersistence.load("v")
    assert str(caught.value) == (
        'session "v" uses log format v1, but this harness reads only v0: the log was written by '
        "a newer harness — upgrade the harness to open it"
    )
    assert execute(postgres, "SELECT count(*) FROM dsh_events WHERE session_id = 't'") == [(6,)]
