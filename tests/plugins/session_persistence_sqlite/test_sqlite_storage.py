"""Backend hooks over a real database: rows, revisions, next-seq and stale checks, repair."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio
import pytest
from sqlite_helpers import backend, connect, db_path, event, meta, open_turn, turn, write

from plugins.session.events import HEADER_KEYS
from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    StaleWriterError,
)

pytestmark = pytest.mark.anyio


async def test_round_trip_keeps_header_and_json_text(tmp_path: Path) -> None:
    b = backend(tmp_path)
    m = meta(parentSession="p", seedLength=2, origin="subagent", agentPreset="coder")
    events = turn(0) + turn(8, 2)
    await write(b, m, [events[:5], events[5:]])
    stored = await backend(tmp_path).load_stored("s1")
    assert stored is not None
    assert stored.meta == {**m, "delegationDepth": 0}
    assert list(stored.meta) == list(HEADER_KEYS)  # every key, in canonical order
    assert [dumps(e) for e in stored.events] == [dumps(e) for e in events]
    assert stored.torn_marker is None
    await b.aclose()


async def test_revision_names_store_incarnation_and_counter(tmp_path: Path) -> None:
    b = backend(tmp_path)
    assert await b.read_stored_revision("s1") is None
    await write(b, meta(), [turn(0)])
    with connect(tmp_path) as db:
        (store_id,) = db.execute("SELECT store_id FROM persistence_state").fetchone()
        (incarnation,) = db.execute("SELECT incarnation FROM sessions").fetchone()
    first = await b.read_stored_revision("s1")
    assert first == f"sqlite:{store_id}:{incarnation}:1"
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert await b.read_stored_revision("s1") == f"sqlite:{store_id}:{incarnation}:2"
    snapshots = await b.list_snapshots()
    assert [s.revision for s in snapshots] == [f"sqlite:{store_id}:{incarnation}:2"]
    with connect(tmp_path) as db:
        db.execute("DELETE FROM sessions")
    await b.append_batch(meta(), turn(0), is_materialized=False)
    again = await b.read_stored_revision("s1")
    assert again is not None
    assert again.endswith(":1")
    assert incarnation not in again
    other = backend(tmp_path / "other")
    await write(other, meta(), [turn(0)])
    assert (await other.read_stored_revision("s1") or "").split(":")[1] != store_id
    await b.aclose()
    await other.aclose()


async def test_append_must_start_at_the_stored_next_seq(tmp_path: Path) -> None:
    b = backend(tmp_path)
    with pytest.raises(
        SessionPersistenceError, match=r"^session s1 append starts at seq 1, stored next seq is 0$"
    ):
        await b.append_batch(meta(), turn(1), is_materialized=False)
    assert await b.read_stored_revision("s1") is None
    await write(b, meta(), [turn(0)])
    with pytest.raises(
        SessionPersistenceError, match=r"^session s1 append starts at seq 9, stored next seq is 8$"
    ):
        await b.append_batch(meta(), turn(9), is_materialized=True)
    assert await b.read_stored_revision("s1") == (await b.list_snapshots())[0].revision
    await b.aclose()


async def test_a_failing_batch_is_rolled_back(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    before = await b.read_stored_revision("s1")
    batch = turn(8, 2)
    batch[3]["time"] = 2**70  # not representable as an SQLite INTEGER: fails mid-insert
    with pytest.raises(OverflowError):
        await b.append_batch(meta(), batch, is_materialized=True)
    assert await b.read_stored_revision("s1") == before
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0) + turn(8, 2)
    await b.aclose()


async def test_lost_materialization_race_and_stale_writer(tmp_path: Path) -> None:
    a, b = backend(tmp_path), backend(tmp_path)
    await write(a, meta(), [turn(0)])
    with pytest.raises(SessionPersistenceError, match="another writer created it first"):
        await b.append_batch(meta(), turn(0), is_materialized=False)
    assert await b.load_stored("s1") is not None
    await a.append_batch(meta(), turn(8, 2), is_materialized=True)
    with pytest.raises(StaleWriterError) as caught:
        await b.append_batch(meta(), turn(16, 3), is_materialized=True)
    assert str(caught.value) == (
        'session "s1" changed on disk since this process last read it; reload it before writing'
    )
    assert await b.load_stored("s1") is not None  # b has seen the new tail now
    await b.append_batch(meta(), turn(16, 3), is_materialized=True)
    await a.aclose()
    await b.aclose()


async def test_list_orders_by_created_at_then_id(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await b.append_batch(meta("b", createdAt=5), turn(0), is_materialized=False)
    await b.append_batch(meta("a", createdAt=9, cwd=None), turn(0), is_materialized=False)
    await b.append_batch(meta("c", createdAt=5, delegationDepth=2), turn(0), is_materialized=False)
    assert await b.list() == [
        {"version": 0, "id": "b", "createdAt": 5, "cwd": "/home/u/proj", "delegationDepth": 0},
        {"version": 0, "id": "c", "createdAt": 5, "cwd": "/home/u/proj", "delegationDepth": 2},
        {"version": 0, "id": "a", "createdAt": 9, "delegationDepth": 0},
    ]
    await b.aclose()


async def test_other_versions_load_without_events(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    with connect(tmp_path) as db:
        db.execute("UPDATE sessions SET version = 3")
        db.execute("UPDATE events SET data = 'not json'")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.meta["version"] == 3
    assert stored.events == []
    await b.aclose()


async def test_read_raw_is_refused(tmp_path: Path) -> None:
    b = backend(tmp_path)
    with pytest.raises(
        SessionPersistenceError,
        match=r"^this session persistence backend does not expose raw artifacts$",
    ):
        await b.read_raw("s1")
    assert b.locate(meta()).kind == "database"


async def test_a_bad_last_row_is_corruption_naming_its_seq(tmp_path: Path) -> None:
    """Rows come from transactions, which never tear: bad JSON in the last row of a closed turn
    is corruption, not a shorter log a repair would then make permanent."""
    b = backend(tmp_path)
    events = turn(0) + turn(8, 2)
    await write(b, meta(), [events])
    with connect(tmp_path) as db:
        db.execute("UPDATE events SET data = '{\"turn\":' WHERE seq = 15")
        before = db.execute("SELECT * FROM events ORDER BY seq").fetchall()
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r"^corrupt session log: invalid committed physical row at seq 15$",
    ):
        await b.load_stored("s1")
    with connect(tmp_path) as db:
        assert db.execute("SELECT * FROM events ORDER BY seq").fetchall() == before
    await b.aclose()


@pytest.mark.parametrize("next_seq", [14, 17])
async def test_a_next_seq_that_disagrees_with_the_rows_is_corruption(
    tmp_path: Path, next_seq: int
) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0) + turn(8, 2)])
    with connect(tmp_path) as db:
        db.execute("UPDATE sessions SET next_seq = ?", (next_seq,))
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == (
        f"corrupt session log: the session row's next seq is {next_seq} but its rows end "
        "before seq 16"
    )
    await b.aclose()


async def test_missing_last_rows_are_corruption(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0) + open_turn(8, 2)])
    with connect(tmp_path) as db:
        db.execute("DELETE FROM events WHERE seq >= 10")
    with pytest.raises(
        SessionPersistenceCorruptionError, match=r"next seq is 14 but its rows end before seq 10$"
    ):
        await b.load_stored("s1")
    await b.aclose()


async def test_commit_repair_inserts_closers_and_refuses_a_marker(tmp_path: Path) -> None:
    b = backend(tmp_path)
    events = turn(0) + open_turn(8, 2)
    await write(b, meta(), [events])
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.torn_marker is None
    closers = [event(len(events), "turn/end", {"turn": 2, "reason": {"kind": "interrupted"}})]
    assert await b.commit_repair(stored.meta, None, closers) is None
    again = await backend(tmp_path).load_stored("s1")
    assert again is not None
    assert again.events == events + closers
    with pytest.raises(TypeError, match="no torn tail"):
        await b.commit_repair(stored.meta, 3, [])
    await b.aclose()


async def test_corrupt_rows_raise_and_stay_untouched(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0) + turn(8, 2)])
    with connect(tmp_path) as db:
        db.execute("UPDATE events SET data = '{' WHERE seq = 2")  # the packed row
        before = db.execute("SELECT * FROM events ORDER BY seq").fetchall()
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r"^corrupt session log: invalid committed physical row at seq 2$",
    ):
        await b.load_stored("s1")
    with connect(tmp_path) as db:
        assert db.execute("SELECT * FROM events ORDER BY seq").fetchall() == before
    await b.aclose()


async def test_a_repair_of_a_moved_log_is_stale(tmp_path: Path) -> None:
    a, b = backend(tmp_path), backend(tmp_path)
    await write(a, meta(), [open_turn(0)])
    first = await a.load_stored("s1")
    second = await b.load_stored("s1")
    assert first is not None
    assert second is not None
    seq = len(first.events)
    closers = [event(seq, "turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})]
    await a.commit_repair(first.meta, None, closers)
    with pytest.raises(StaleWriterError):
        await b.commit_repair(second.meta, None, closers)
    third = await b.load_stored("s1")
    assert third is not None
    assert third.events == [*open_turn(0), *closers]
    await a.aclose()
    await b.aclose()


async def test_waiting_for_the_database_never_blocks_the_event_loop(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    holder = sqlite3.connect(db_path(tmp_path), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another writer: our BEGIN IMMEDIATE waits (busy timeout)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async def release() -> None:
        await anyio.sleep(0.3)
        holder.execute("COMMIT")

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        group.start_soon(release)
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
        group.cancel_scope.cancel()
    assert time.monotonic() - started >= 0.25
    assert ticks >= 10  # the loop kept running while the write waited
    holder.close()
    await b.aclose()


async def test_large_batches_insert_in_several_statements(tmp_path: Path) -> None:
    """A batch of more rows than one `INSERT` takes is split in seq order, in one
    transaction: a create of 250 rows and an append of exactly 100 then 101."""
    b = backend(tmp_path)
    first = [event(seq, "tool/call", {"callId": f"c{seq}"}) for seq in range(250)]
    second = [event(seq, "tool/call", {"callId": f"c{seq}"}) for seq in range(250, 350)]
    third = [event(seq, "tool/call", {"callId": f"c{seq}"}) for seq in range(350, 451)]
    await write(b, meta(), [first, second, third])
    with connect(tmp_path) as db:
        assert db.execute("SELECT count(*), max(seq) FROM events").fetchone() == (451, 450)
        assert db.execute("SELECT revision, next_seq FROM sessions").fetchone() == (3, 451)
    stored = await backend(tmp_path).load_stored("s1")
    assert stored is not None
    assert [dumps(e) for e in stored.events] == [dumps(e) for e in first + second + third]
    await b.aclose()


async def test_a_failed_append_writes_none_of_its_rows(tmp_path: Path) -> None:
    """A row SQLite refuses after the session row advanced rolls the whole append back."""
    b = backend(tmp_path)
    await b.acquire_writer("s1")
    await write(b, meta(), [turn(0)])
    with connect(tmp_path) as db:
        (rows,) = db.execute("SELECT count(*) FROM events").fetchone()
    bad = [event(seq, "tool/call", {"callId": f"c{seq}"}) for seq in range(8, 208)]
    bad[150]["time"] = "not an integer"  # the STRICT table refuses it in the second INSERT
    with pytest.raises(SessionPersistenceError, match="cannot store TEXT value in INTEGER"):
        await b.append_batch(meta(), bad, is_materialized=True)
    with connect(tmp_path) as db:
        assert db.execute("SELECT count(*) FROM events").fetchone() == (rows,)
        assert db.execute("SELECT revision, next_seq FROM sessions").fetchone() == (1, 8)
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0) + turn(8, 2)
    await b.aclose()


async def test_a_live_writers_append_runs_five_statements(tmp_path: Path) -> None:
    """The steady-state append: the schema is re-read only after another connection
    committed, and the next-seq and lock checks ride on the session row's `UPDATE`."""
    b = backend(tmp_path)
    await b.acquire_writer("s1")
    await write(b, meta(), [turn(0), turn(8, 2)])
    seen: list[str] = []
    connection = b._connection
    assert connection is not None
    connection.set_trace_callback(seen.append)
    await b.append_batch(meta(), turn(16, 3), is_materialized=True)
    assert [s.split(" (")[0].split(" WHERE")[0] for s in seen] == [
        "BEGIN IMMEDIATE",
        "PRAGMA data_version",
        "UPDATE sessions SET revision = revision + 1, next_seq = 24",
        "INSERT INTO events",
        "COMMIT",
    ]
    with connect(tmp_path) as db:
        db.execute("UPDATE session_locks SET heartbeat_at = heartbeat_at + 1")  # another commit
    seen.clear()
    await b.append_batch(meta(), turn(24, 4), is_materialized=True)
    assert any("pragma_user_version" in s for s in seen)  # the schema is checked again
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0) + turn(8, 2) + turn(16, 3) + turn(24, 4)
    connection.set_trace_callback(None)
    await b.aclose()
