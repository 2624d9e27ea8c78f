"""Damaged rows are corruption naming the seq: transactions never leave a torn tail."""

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

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

OPEN = [event(5, "turn/start", {"turn": 2}), event(6, "step/start", {"turn": 2, "step": 1})]


async def stored_rows(target: PostgresTarget) -> list[tuple[object, ...]]:
    return execute(target, "SELECT seq, data FROM dsh_events ORDER BY seq")


async def test_a_bad_last_row_is_corruption_naming_its_seq(postgres: PostgresTarget) -> None:
    """Rows come from transactions, which never tear: bad JSON in the last row of a closed turn
    is corruption, never a shorter log."""
    b = backend(postgres)
    await b.append_batch(meta(), turn(0), is_materialized=False)
    execute(postgres, "UPDATE dsh_events SET data = '{\"turn\":' WHERE seq = 4")
    before = await stored_rows(postgres)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == "corrupt session log: invalid committed physical row at seq 4"
    assert await stored_rows(postgres) == before
    await b.aclose()


@pytest.mark.parametrize("next_seq", [6, 9])
async def test_a_next_seq_that_disagrees_with_the_rows_is_corruption(
    postgres: PostgresTarget, next_seq: int
) -> None:
    b = backend(postgres)
    await b.append_batch(meta(), [*turn(0), *OPEN], is_materialized=False)
    execute(postgres, "UPDATE dsh_sessions SET next_seq = %s", next_seq)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == (
        f"corrupt session log: the session row's next seq is {next_seq} but its rows end "
        "before seq 7"
    )
    assert len(await stored_rows(postgres)) == 7
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
    stored = await b.load_stored("s1")
    seen = await other.load_stored("s1")
    assert stored is not None
    assert seen is not None
    closers = interrupted_turn_closers(stored.events)
    assert await other.commit_repair(seen.meta, None, closers) is None
    with pytest.raises(StaleWriterError):
        await b.commit_repair(stored.meta, None, closers)
    repaired = await backend(postgres).load_stored("s1")
    assert repaired is not None
    assert [dumps(e) for e in repaired.events] == [dumps(e) for e in [*turn(0), *OPEN, *closers]]
    with pytest.raises(TypeError, match="no torn tail"):
        await b.commit_repair(stored.meta, 6, [])
    await b.aclose()
    await other.aclose()
