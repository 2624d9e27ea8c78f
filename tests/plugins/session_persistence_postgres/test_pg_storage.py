"""Rows, headers, revisions, listing, the stale-writer check and the schema version."""

from __future__ import annotations

import pytest
from pg_helpers import backend, event, execute, meta, turn
from postgres_support import PostgresTarget

from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import SessionPersistenceError, StaleWriterError
from plugins.session_persistence_postgres import PostgresBackend

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

MESSAGE = {
    "id": "m1",
    "role": "user",
    "content": [{"type": "text", "text": "z\u00e9\u0000\ud800 \U0001f600 1e21"}],
    "source": {"kind": "user"},
}


async def test_events_keep_their_json_text_and_key_order(postgres: PostgresTarget) -> None:
    live = {
        "type": "user/message",
        "seq": 1,
        "time": 2,
        "data": MESSAGE,
        "sourceEventSeqs": [0],
        "surfaceOp": "append",
    }
    closer = {
        "type": "tool/result",
        "seq": 2,
        "time": 2,
        "data": {"turn": 1, "x": [1.5, 1e21, 1e-7, None, True]},
        "surfaceOp": {"op": "replace", "start": 0, "end": 1},
        "sourceEventSeqs": [],
    }
    ignorable = {"type": "x/new", "seq": 3, "time": 9, "data": {}, "ignorable": True}
    events = [event(0, "turn/start", {"turn": 1}), live, closer, ignorable]
    b = backend(postgres)
    await b.append_batch(meta(), events, is_materialized=False)
    stored = await backend(postgres).load_stored("s1")
    assert stored is not None
    assert [dumps(e) for e in stored.events] == [dumps(e) for e in events]
    assert [list(e) for e in stored.events] == [list(e) for e in events]
    assert stored.torn_marker is None
    rows = execute(postgres, "SELECT data, key_order FROM dsh_events ORDER BY seq")
    assert rows[1] == (dumps(MESSAGE), "tsmdeo")
    assert rows[2][1] == "tsmdoe"
    await b.aclose()


async def test_header_fields_revisions_and_list_order(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    full = meta(
        "b",
        createdAt=5,
        parentSession="p",
        seedLength=3,
        origin="subagent",
        delegationDepth=2,
        agentPreset="coder",
    )
    await b.append_batch(full, turn(0), is_materialized=False)
    await b.append_batch(meta("a", cwd=None, createdAt=5), turn(0), is_materialized=False)
    await b.append_batch(meta("c", createdAt=1), turn(0), is_materialized=False)
    fresh = backend(postgres)
    assert [h["id"] for h in await fresh.list()] == ["c", "a", "b"]
    headers = {h["id"]: h for h in await fresh.list()}
    assert headers["b"] == full
    assert headers["a"] == {"version": 0, "id": "a", "createdAt": 5, "delegationDepth": 0}
    before = await fresh.read_stored_revision("b")
    snapshots = {s.header["id"]: s.revision for s in await fresh.list_snapshots()}
    assert snapshots["b"] == before
    assert before is not None
    assert before.startswith("postgres:")
    assert await fresh.read_stored_revision("b") == before
    await fresh.load_stored("b")
    await fresh.append_batch(full, turn(5, 2), is_materialized=True)
    after = await b.read_stored_revision("b")
    assert after not in (None, before)
    assert await fresh.read_stored_revision("nope") is None
    assert await fresh.load_stored("nope") is None
    # Another store (schema) never shares a revision.
    await b.aclose()
    await fresh.aclose()


async def test_stale_writer_and_seq_checks(postgres: PostgresTarget) -> None:
    first, second = backend(postgres), backend(postgres)
    await first.append_batch(meta(), turn(0), is_materialized=False)
    assert await second.load_stored("s1") is not None
    await second.append_batch(meta(), turn(5, 2), is_materialized=True)
    with pytest.raises(StaleWriterError) as caught:
        await first.append_batch(meta(), turn(10, 3), is_materialized=True)
    assert str(caught.value) == (
        'session "s1" changed on disk since this process last read it; reload it before writing'
    )
    never_read = backend(postgres)
    with pytest.raises(StaleWriterError):
        await never_read.append_batch(meta(), turn(10, 3), is_materialized=True)
    await first.load_stored("s1")
    with pytest.raises(SessionPersistenceError) as gap:
        await first.append_batch(meta(), turn(11, 3), is_materialized=True)
    assert str(gap.value) == "session s1 append starts at seq 11, stored next seq is 10"
    stored = await first.load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 10
    for b in (first, second, never_read):
        await b.aclose()


async def test_losing_the_creation_race_is_refused(postgres: PostgresTarget) -> None:
    first, second = backend(postgres), backend(postgres)
    await first.append_batch(meta(), turn(0), is_materialized=False)
    with pytest.raises(SessionPersistenceError) as caught:
        await second.append_batch(meta(), turn(0, 9), is_materialized=False)
    assert str(caught.value) == (
        f'session "s1" already has a persisted log in PostgreSQL schema "{postgres.schema}" '
        "(another writer created it first)"
    )
    stored = await second.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0)
    await first.aclose()
    await second.aclose()


async def test_envelopes_the_rows_cannot_hold_are_refused(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    cases = [
        ({**event(0, "turn/start", {}), "extra": 1}, 'unknown envelope key "extra"'),
        ({"type": "turn/start", "seq": 0, "time": 1.5, "data": {}}, "integer seq and time"),
        ({"type": "turn/start", "seq": 0, "time": 1}, "and data"),
        ({**event(0, "user/message", {}), "sourceEventSeqs": ["1"]}, "list of integers"),
    ]
    for bad, why in cases:
        with pytest.raises(SessionPersistenceError, match=why):
            await b.append_batch(meta(), [bad], is_materialized=False)
    with pytest.raises(SessionPersistenceError, match="unknown header key"):
        await b.append_batch(meta(extra=1), turn(0), is_materialized=False)
    with pytest.raises(SessionPersistenceError, match="cwd must be a string"):
        await b.append_batch({**meta(), "cwd": 3}, turn(0), is_materialized=False)
    assert await b.list() == []
    await b.aclose()


async def test_raw_artifacts_are_refused_and_nothing_is_located(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    assert b.locate(meta()) is None
    with pytest.raises(SessionPersistenceError) as caught:
        await b.read_raw("s1")
    assert str(caught.value) == "this session persistence backend does not expose raw artifacts"
    await b.aclose()


async def test_tables_and_an_incompatible_schema_version(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    await b.open()
    tables = execute(
        postgres,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
        postgres.schema,
    )
    assert [t[0] for t in tables] == [
        "dsh_events",
        "dsh_persistence_state",
        "dsh_session_owners",
        "dsh_sessions",
    ]
    kinds = dict(
        execute(
            postgres,
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'dsh_events'",
            postgres.schema,
        )
    )
    assert (kinds["data"], kinds["source_event_seqs"]) == ("text", "ARRAY")
    assert execute(postgres, "SELECT schema_version FROM dsh_persistence_state") == [(1,)]
    await b.aclose()
    execute(postgres, "UPDATE dsh_persistence_state SET schema_version = 2")
    newer = backend(postgres)
    with pytest.raises(SessionPersistenceError) as caught:
        await newer.open()
    assert str(caught.value) == (
        f'session database schema "{postgres.schema}" has schema version 2, incompatible with '
        "this build (1)"
    )
    await newer.aclose()


async def test_concurrent_first_opens_create_the_schema_once(postgres: PostgresTarget) -> None:
    import anyio

    backends = [backend(postgres) for _ in range(4)]
    try:
        async with anyio.create_task_group() as group:
            for b in backends:
                group.start_soon(b.open)
    finally:
        for b in backends:
            await b.aclose()
    assert len(execute(postgres, "SELECT store_id FROM dsh_persistence_state")) == 1


async def test_a_closed_backend_refuses_work(postgres: PostgresTarget) -> None:
    b = PostgresBackend(postgres.dsn, schema=postgres.schema, pool_max_size=1)
    await b.append_batch(meta(), turn(0), is_materialized=False)
    await b.aclose()
    await b.aclose()
    with pytest.raises(SessionPersistenceError, match="closed"):
        await b.load_stored("s1")
