"""Damaged rows: a torn tail is dropped by the repair; damage before a turn/end is corruption."""

from __future__ import annotations

import pytest
from pg_helpers import backend, event, execute, meta, turn
from postgres_support import PostgresTarget

from plugins.session.jsonutil import dumps
from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    StaleWriterError,
)
from plugins.session_persistence_postgres.rows import TornMarker

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

OPEN = [event(5, "turn/start", {"turn": 2}), event(6, "step/start", {"turn": 2, "step": 1})]


async def stored_rows(target: PostgresTarget) -> list[tuple[object, ...]]:
    return execute(target, "SELECT seq, data FROM dsh_events ORDER BY seq")


async def test_a_bad_tail_row_is_torn_and_repaired(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    await b.append_batch(meta(), [*turn(0), *OPEN], is_materialized=False)
    await b.load_stored("s1")
    await b.append_batch(
        meta(), [event(7, "step/end", {"turn": 2, "step": 1})], is_materialized=True
    )
    execute(postgres, "UPDATE dsh_events SET data = '{\"turn\":' WHERE seq = 7")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == [*turn(0), *OPEN]
    assert isinstance(stored.torn_marker, TornMarker)
    assert stored.torn_marker.seq == 7
    closers = interrupted_turn_closers(stored.events)
    await b.commit_repair(stored.meta, stored.torn_marker, closers)
    repaired = await backend(postgres).load_stored("s1")
    assert repaired is not None
    assert repaired.torn_marker is None
    assert [dumps(e) for e in repaired.events] == [dumps(e) for e in [*turn(0), *OPEN, *closers]]
    assert repaired.revision != stored.revision
    await b.aclose()


async def test_a_missing_tail_and_rows_past_next_seq_are_torn(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    await b.append_batch(meta(), [*turn(0), *OPEN], is_materialized=False)
    execute(postgres, "UPDATE dsh_sessions SET next_seq = 9")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.torn_marker == TornMarker(7, 9, 1)
    execute(postgres, "UPDATE dsh_sessions SET next_seq = 6")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 6
    assert stored.torn_marker == TornMarker(6, 6, 1)
    await b.commit_repair(stored.meta, stored.torn_marker, [])
    assert [row[0] for row in await stored_rows(postgres)] == list(range(6))
    assert execute(postgres, "SELECT next_seq, revision FROM dsh_sessions") == [(6, 2)]
    await b.aclose()


async def test_damage_before_a_turn_end_is_corruption_and_untouched(
    postgres: PostgresTarget,
) -> None:
    b = backend(postgres)
    await b.append_batch(meta(), [*turn(0), *OPEN], is_materialized=False)
    execute(postgres, "UPDATE dsh_events SET key_order = 'tsm' WHERE seq = 2")
    before = await stored_rows(postgres)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == "corrupt session log: invalid committed physical row at seq 2"
    execute(postgres, "UPDATE dsh_events SET key_order = 'tsmd' WHERE seq = 2")
    execute(postgres, "DELETE FROM dsh_events WHERE seq = 1")
    with pytest.raises(SessionPersistenceCorruptionError, match=r"at seq 1$"):
        await b.load_stored("s1")
    assert len(await stored_rows(postgres)) == len(before) - 1
    await b.aclose()


async def test_a_repair_of_a_moved_log_is_stale(postgres: PostgresTarget) -> None:
    b, other = backend(postgres), backend(postgres)
    await b.append_batch(meta(), [*turn(0), *OPEN], is_materialized=False)
    execute(postgres, "UPDATE dsh_events SET data = 'x' WHERE seq = 6")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.torn_marker is not None
    seen = await other.load_stored("s1")
    assert seen is not None
    await other.commit_repair(seen.meta, seen.torn_marker, [])
    with pytest.raises(StaleWriterError):
        await b.commit_repair(stored.meta, stored.torn_marker, [])
    with pytest.raises(TypeError, match="not a PostgreSQL torn-tail marker"):
        await b.commit_repair(stored.meta, 6, [])
    await b.aclose()
    await other.aclose()
