"""Cross-session group commit on PostgreSQL (docs/performance.md): appends of many sessions
waiting at once go as one statement, so one transaction and one commit; each session keeps its
own checks, a bad one fails alone, and a failed commit fails the whole group and leaves every
writer able to retry from what is stored.

Appends started in one batch of tasks submit before the group task first runs (asyncio runs
ready tasks in order), so they make one group. Rows written by one transaction share its id
(`xmin`): that is how these tests see what went together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pg_helpers import backend, execute, meta, turn, until
from postgres_support import PostgresTarget

from plugins.session_persistence.errors import (
    SessionExistsError,
    SessionPersistenceError,
    WriterLockLostError,
)
from plugins.session_persistence_postgres import PostgresBackend, lock_key

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

IDS = ("a", "b", "c")
JsonObject = dict[str, Any]


@pytest.fixture
async def store(postgres: PostgresTarget) -> AsyncIterator[PostgresBackend]:
    """A backend holding IDS, each with one complete turn (seqs 0-4) stored."""
    b = backend(postgres)
    for session_id in IDS:
        await b.acquire_writer(session_id)
        await b.append_batch(meta(session_id), turn(0), is_materialized=False)
    try:
        yield b
    finally:
        await b.aclose()


Append = tuple[str, Sequence[JsonObject], bool]


async def together(b: PostgresBackend, appends: Sequence[Append]) -> list[BaseException | None]:
    """Start every append at once; each one's error (None when it was written)."""
    outcomes: list[BaseException | None] = [None] * len(appends)

    async def run(index: int, session_id: str, events: Sequence[JsonObject], first: bool) -> None:
        try:
            await b.append_batch(meta(session_id), events, is_materialized=not first)
        except Exception as error:
            outcomes[index] = error

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for index, (session_id, events, first) in enumerate(appends):
                tg.start_soon(run, index, session_id, events, first)
    return outcomes


def next_turn(session_id: str) -> Append:
    return (session_id, turn(5, 2), False)


def transactions(target: PostgresTarget, seq: int) -> dict[str, str]:
    """Each session's transaction id for its row at `seq`."""
    rows = execute(target, "SELECT session_id, xmin::text FROM dsh_events WHERE seq = %s", seq)
    return dict(rows)


def seqs(target: PostgresTarget) -> dict[str, list[int]]:
    rows = execute(target, "SELECT session_id, seq FROM dsh_events ORDER BY session_id, seq")
    out: dict[str, list[int]] = {}
    for session_id, seq in rows:
        out.setdefault(session_id, []).append(seq)
    return out


async def test_appends_of_many_sessions_share_one_transaction(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    assert await together(store, [next_turn(session_id) for session_id in IDS]) == [None] * 3
    assert len(set(transactions(postgres, 5).values())) == 1
    assert len(set(transactions(postgres, 0).values())) == 3  # the fixture wrote one by one
    assert seqs(postgres) == {key: list(range(10)) for key in IDS}
    assert execute(postgres, "SELECT id, next_seq, revision FROM dsh_sessions ORDER BY id") == [
        (session_id, 10, 2) for session_id in IDS
    ]


async def test_first_batches_join_the_group_and_a_lost_race_fails_alone(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    appends: list[Append] = [next_turn("a"), ("new", turn(0), True), ("b", turn(0), True)]
    outcomes = await together(store, appends)
    assert outcomes[:2] == [None, None]
    assert isinstance(outcomes[2], SessionExistsError)  # "b" is stored already
    assert transactions(postgres, 5)["a"] == transactions(postgres, 0)["new"]
    assert seqs(postgres) == {
        "a": list(range(10)),
        "b": list(range(5)),
        "c": list(range(5)),
        "new": list(range(5)),
    }


async def test_a_refused_check_fails_only_its_session(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    store._seen["b"] = 99  # b's writer no longer agrees with what is stored
    outcomes = await together(store, [next_turn(session_id) for session_id in IDS])
    assert outcomes[0] is None
    assert outcomes[2] is None
    assert getattr(outcomes[1], "code", None) == "SESSION_STALE_WRITER"
    assert transactions(postgres, 5)["a"] == transactions(postgres, 5)["c"]
    assert seqs(postgres)["b"] == list(range(5))


def fail_rows_of(target: PostgresTarget, session_id: str) -> None:
    """Every event row of `session_id` is refused by the server (an error in the statement)."""
    execute(
        target,
        """
        CREATE FUNCTION dsh_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.session_id = '"""
        + session_id
        + """' THEN RAISE EXCEPTION 'injected bad row'; END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER dsh_test_refuse BEFORE INSERT ON dsh_events
            FOR EACH ROW EXECUTE FUNCTION dsh_test_refuse();
        """,
    )


async def test_a_bad_row_fails_only_its_session(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    fail_rows_of(postgres, "b")
    outcomes = await together(store, [next_turn(session_id) for session_id in IDS])
    assert outcomes[0] is None
    assert outcomes[2] is None
    error = outcomes[1]
    assert isinstance(error, SessionPersistenceError)
    assert error.code == "SESSION_STORAGE_FAILED"
    assert 'writing session "b"' in str(error)
    assert "injected bad row" in str(error)
    assert seqs(postgres) == {"a": list(range(10)), "b": list(range(5)), "c": list(range(10))}
    # b's writer still agrees with storage: once the fault is gone, its retry goes in.
    execute(postgres, "DROP TRIGGER dsh_test_refuse ON dsh_events")
    await store.append_batch(meta("b"), turn(5, 2), is_materialized=True)
    assert seqs(postgres)["b"] == list(range(10))


def stall_next_group(target: PostgresTarget, seconds: float) -> None:
    """The next statement inserting event rows sleeps for `seconds` first (once)."""
    execute(
        target,
        """
        CREATE SEQUENCE dsh_test_stalls;
        CREATE FUNCTION dsh_test_stall() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
        BEGIN
            IF nextval('dsh_test_stalls') = 1 THEN PERFORM pg_sleep(%s); END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER dsh_test_stall BEFORE INSERT ON dsh_events
            FOR EACH STATEMENT EXECUTE FUNCTION dsh_test_stall();
        """.replace("%s", str(float(seconds))),
    )


async def test_a_connection_lost_mid_group_fails_the_group_and_each_retries(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    seen = dict(store._seen)
    stall_next_group(postgres, 30)
    writing: list[tuple[Any, ...]] = []

    async def kill_the_writer() -> None:
        def stalled() -> bool:
            writing[:] = execute(
                postgres,
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                "AND datname = current_database()",
            )
            return bool(writing)

        await until(stalled, "the group statement stalls")
        execute(postgres, "SELECT pg_terminate_backend(%s)", writing[0][0])

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_the_writer)
        outcomes = await together(store, [next_turn(session_id) for session_id in IDS])
    for error in outcomes:
        assert isinstance(error, SessionPersistenceError)
        assert error.code == "SESSION_STORAGE_FAILED"
        assert "writing 3 sessions" in str(error)
    assert store._seen == seen
    assert seqs(postgres) == {key: list(range(5)) for key in IDS}
    # Each writer goes on from what is stored; the retries share a group again.
    assert await together(store, [next_turn(session_id) for session_id in IDS]) == [None] * 3
    assert seqs(postgres) == {key: list(range(10)) for key in IDS}
    assert len(set(transactions(postgres, 5).values())) == 1


async def test_a_lock_lost_during_a_group_fails_only_that_session(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    # b's lock goes away on the server (as if its connection had dropped for it alone), and
    # another writer takes it before this instance could re-take it.
    assert store._lock_conn is not None
    await store._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key("b"),))
    thief = backend(postgres)
    try:
        await thief.acquire_writer("b")
        outcomes = await together(store, [next_turn(session_id) for session_id in IDS])
    finally:
        await thief.aclose()
    assert outcomes[0] is None
    assert outcomes[2] is None
    assert isinstance(outcomes[1], WriterLockLostError)
    assert transactions(postgres, 5)["a"] == transactions(postgres, 5)["c"]
    assert seqs(postgres)["b"] == list(range(5))


async def test_a_lock_that_can_be_retaken_is_and_the_append_goes_in(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    assert store._lock_conn is not None
    await store._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key("b"),))
    assert await together(store, [next_turn(session_id) for session_id in IDS]) == [None] * 3
    assert seqs(postgres) == {key: list(range(10)) for key in IDS}
    # Re-taking it replaced the lock connection (the backend takes a missing lock for a dead
    # connection); the others' next writes re-take theirs the same way.
    appends = [(session_id, turn(10, 3), False) for session_id in IDS]
    assert await together(store, appends) == [None] * 3
    assert seqs(postgres) == {key: list(range(15)) for key in IDS}


async def test_appends_of_one_session_queued_together_go_in_order(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    # Three appends of "a" started at once: each waits for the group after the one before.
    appends: list[Append] = [("a", turn(start, n), False) for n, start in enumerate((5, 10, 15))]
    assert await together(store, [*appends, next_turn("b")]) == [None] * 4
    assert seqs(postgres)["a"] == list(range(20))
    assert transactions(postgres, 5)["a"] == transactions(postgres, 5)["b"]
    assert len({transactions(postgres, seq)["a"] for seq in (5, 10, 15)}) == 3


async def test_many_sessions_keep_their_own_order_under_concurrency(
    postgres: PostgresTarget,
) -> None:
    b = backend(postgres)
    ids = [f"s{n}" for n in range(40)]
    try:

        async def writer(session_id: str) -> None:
            await b.acquire_writer(session_id)
            await b.append_batch(meta(session_id), turn(0), is_materialized=False)
            for n in range(1, 6):
                await b.append_batch(meta(session_id), turn(5 * n, n + 1), is_materialized=True)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for session_id in ids:
                    tg.start_soon(writer, session_id)
        for session_id in ids:
            stored = await b.load_stored(session_id)
            assert stored is not None
            assert [e["seq"] for e in stored.events] == list(range(30))
            assert [e["data"].get("turn") for e in stored.events[::5]] == [1, 2, 3, 4, 5, 6]
    finally:
        await b.aclose()
    groups = execute(postgres, "SELECT count(DISTINCT xmin::text) FROM dsh_events")[0][0]
    assert groups < 40 * 6  # some appends shared a transaction


async def test_a_cancelled_append_still_waits_for_its_group(
    postgres: PostgresTarget, store: PostgresBackend
) -> None:
    stall_next_group(postgres, 0.3)
    with anyio.move_on_after(0.05):
        await store.append_batch(meta("a"), turn(5, 2), is_materialized=True)
    assert seqs(postgres)["a"] == list(range(10))  # durable when the cancelled call returned
    await store.append_batch(meta("a"), turn(10, 3), is_materialized=True)
    assert seqs(postgres)["a"] == list(range(15))


async def test_a_closing_backend_finishes_its_groups_first(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    await b.acquire_writer("a")
    await b.append_batch(meta("a"), turn(0), is_materialized=False)
    stall_next_group(postgres, 0.3)
    async with anyio.create_task_group() as tg:
        # The second append waits for the group after the first (one per session a group).
        tg.start_soon(partial(b.append_batch, meta("a"), turn(5, 2), is_materialized=True))
        tg.start_soon(partial(b.append_batch, meta("a"), turn(10, 3), is_materialized=True))
        await anyio.sleep(0.1)
        await b.aclose()
    assert seqs(postgres)["a"] == list(range(15))
