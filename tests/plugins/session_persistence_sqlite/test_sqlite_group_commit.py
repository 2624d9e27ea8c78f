"""Cross-session group commit: appends of many sessions queued together share one transaction
(one COMMIT, one fsync); each keeps its own checks, and a bad one fails alone."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.session_persistence_sqlite.rows as rows_module
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.errors import (
    SessionPersistenceError,
    StaleWriterError,
    WriterLockLostError,
)
from plugins.session_persistence.testing import complete_turn, meta
from plugins.session_persistence_sqlite import SqliteBackend

pytestmark = pytest.mark.anyio

IDS = ("a", "b", "c")


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[SqliteBackend]:
    store = SqliteBackend(tmp_path / "sessions.sqlite3")
    for session_id in IDS:
        await store.acquire_writer(session_id)
        await store.append_batch(meta(session_id), complete_turn(0), is_materialized=False)
    try:
        yield store
    finally:
        await store.aclose()


async def queued(store: SqliteBackend, count: int) -> None:
    """Wait (bounded) until `count` calls are on the backend's I/O thread."""
    for _ in range(5000):
        if store._thread._queued >= count:
            return
        await anyio.sleep(0.002)
    raise AssertionError(f"only {store._thread._queued} calls queued, expected {count}")


async def together(
    store: SqliteBackend, change: Any, session_ids: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]]:
    """Queue `change(session_id)` per session behind a held call on the I/O thread and release
    them at once; return each outcome (None or its exception) and the statements the
    connection ran."""
    statements: list[str] = []
    await store.store_identity()  # the connection is open
    assert store._connection is not None
    store._connection.set_trace_callback(statements.append)
    release = threading.Event()
    outcomes: dict[str, Any] = {}

    async def run(session_id: str) -> None:
        try:
            await change(session_id)
        except Exception as error:
            outcomes[session_id] = error
        else:
            outcomes[session_id] = None

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._thread.run, release.wait)
            await queued(store, 1)
            for session_id in session_ids:
                tg.start_soon(run, session_id)
            await queued(store, 1 + len(session_ids))
            release.set()
    store._connection.set_trace_callback(None)
    return outcomes, statements


async def appended_together(
    store: SqliteBackend, *, encoded_ahead: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """`together` with one append of a complete turn per session in `IDS`; with
    `encoded_ahead` each goes through a live encoder that admitted its events."""

    async def append(session_id: str) -> None:
        events = complete_turn(6, 2)
        write = store.append_batch
        if encoded_ahead:
            encoder = store.live_encoder()
            for event in events:
                encoder.admit(event)
            write = encoder.append_batch
        await write(meta(session_id), events, is_materialized=True)

    return await together(store, append, IDS)


async def test_queued_appends_of_many_sessions_share_one_commit(backend: SqliteBackend) -> None:
    outcomes, statements = await appended_together(backend)
    assert outcomes == dict.fromkeys(IDS)
    assert statements.count("COMMIT") == 1
    assert statements.count("BEGIN IMMEDIATE") == 1
    for session_id in IDS:
        stored = await backend.load_stored(session_id)
        assert stored is not None
        assert [e["seq"] for e in stored.events] == list(range(12))


async def test_prepared_rows_of_many_sessions_share_one_commit(
    backend: SqliteBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Live encoders' writes group like any append, binding the rows made at admission."""
    encoded: list[Any] = []
    real = rows_module._event_row

    def counting(event: JsonObject) -> Any:
        encoded.append(event)
        return real(event)

    monkeypatch.setattr(rows_module, "_event_row", counting)
    outcomes, statements = await appended_together(backend, encoded_ahead=True)
    assert outcomes == dict.fromkeys(IDS)
    assert statements.count("COMMIT") == 1
    assert len(encoded) == len(IDS) * len(complete_turn(6, 2))  # each once, at admission
    for session_id in IDS:
        stored = await backend.load_stored(session_id)
        assert stored is not None
        assert stored.events == [*complete_turn(0), *complete_turn(6, 2)]


async def test_a_bad_append_fails_alone(backend: SqliteBackend) -> None:
    backend._seen["b"] = 99  # b's writer no longer agrees with the stored next seq
    outcomes, statements = await appended_together(backend)
    assert isinstance(outcomes.pop("b"), StaleWriterError)
    assert outcomes == {"a": None, "c": None}
    assert statements.count("COMMIT") == 1
    lengths = {}
    for session_id in IDS:
        stored = await backend.load_stored(session_id)
        assert stored is not None
        lengths[session_id] = len(stored.events)
    assert lengths == {"a": 12, "b": 6, "c": 12}


async def test_a_failed_commit_fails_every_append_and_forgets_them(
    backend: SqliteBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = dict(backend._seen)
    real = backend._commit_group

    def failing(calls: Any) -> None:
        def boom() -> None:
            raise OSError(28, "No space left on device")

        # Every append runs, then the unit fails as a COMMIT would.
        real([*calls, _Raising(boom)])

    monkeypatch.setattr(backend._thread, "_group", failing)
    outcomes, _ = await appended_together(backend)
    assert all(isinstance(error, OSError) for error in outcomes.values())
    assert backend._seen == seen
    for session_id in IDS:
        stored = await backend.load_stored(session_id)
        assert stored is not None
        assert len(stored.events) == 6
    monkeypatch.undo()
    # After the fault, each writer goes on from what is stored.
    await backend.append_batch(meta("a"), complete_turn(6, 2), is_materialized=True)


class _Raising:
    """A group member whose failure escapes the runner (as a failed COMMIT does)."""

    error = None
    fn = None  # no append: the runner executes it in its turn

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def execute(self) -> None:
        self._fn()


async def test_queued_lock_changes_share_one_commit(tmp_path: Path) -> None:
    """Many sessions taking (then releasing) their writer locks at once: one COMMIT each way."""
    store = SqliteBackend(tmp_path / "sessions.sqlite3")
    try:
        outcomes, statements = await together(store, store.acquire_writer, IDS)
        assert outcomes == dict.fromkeys(IDS)
        assert statements.count("COMMIT") == 1
        assert set(store._tokens) == set(IDS)
        for session_id in IDS:
            assert await store.lock_record(session_id) is not None
        outcomes, statements = await together(store, store.release_writer, IDS)
        assert outcomes == dict.fromkeys(IDS)
        assert statements.count("COMMIT") == 1
        for session_id in IDS:
            assert await store.lock_record(session_id) is None
    finally:
        await store.aclose()


async def test_a_failed_commit_forgets_the_locks_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteBackend(tmp_path / "sessions.sqlite3")
    try:
        await store.acquire_writer("a")
        real = store._commit_group

        def failing(calls: Any) -> None:
            def boom() -> None:
                raise OSError(5, "Input/output error")

            real([*calls, _Raising(boom)])

        monkeypatch.setattr(store._thread, "_group", failing)
        outcomes, _ = await together(store, store.acquire_writer, ("b", "c"))
        assert all(isinstance(error, OSError) for error in outcomes.values())
        assert set(store._tokens) == {"a"}  # b's and c's were never committed
        monkeypatch.undo()
        for session_id in ("b", "c"):
            assert await store.lock_record(session_id) is None
            await store.acquire_writer(session_id)  # taken again, for real this time
            assert await store.lock_record(session_id) is not None
    finally:
        await store.aclose()


async def test_live_appends_go_in_together(backend: SqliteBackend) -> None:
    """A group's live appends: one set-wise UPDATE for every session, their rows together,
    no savepoint per append."""
    outcomes, statements = await appended_together(backend)
    assert outcomes == dict.fromkeys(IDS)
    updates = [s for s in statements if s.startswith("UPDATE sessions")]
    assert len(updates) == 1
    assert "FROM (VALUES" in updates[0]
    assert len([s for s in statements if s.startswith("INSERT INTO events")]) == 1
    assert statements.count("SAVEPOINT together") == 1
    assert "SAVEPOINT batch" not in statements
    assert backend._seen == dict.fromkeys(IDS, 12)


async def test_a_lost_lock_fails_alone_when_appended_together(backend: SqliteBackend) -> None:
    assert backend._connection is not None
    backend._connection.execute("UPDATE session_locks SET token = 'another' WHERE session_id = 'b'")
    outcomes, _ = await appended_together(backend)
    assert isinstance(outcomes.pop("b"), WriterLockLostError)
    assert outcomes == {"a": None, "c": None}
    lengths = {}
    for session_id in IDS:
        stored = await backend.load_stored(session_id)
        assert stored is not None
        lengths[session_id] = len(stored.events)
    assert lengths == {"a": 12, "b": 6, "c": 12}
    assert backend._seen == {"a": 12, "b": 6, "c": 12}


async def test_bad_rows_fail_alone_when_appended_together(backend: SqliteBackend) -> None:
    """A row SQLite refuses (here: b's seq 6 already taken) undoes the set-wise writes; each
    append then runs alone, so only b fails."""
    assert backend._connection is not None
    backend._connection.execute(
        "INSERT INTO events (session_id, seq, type, time, data) VALUES ('b', 6, 'x', 0, '{}')"
    )
    outcomes, _ = await appended_together(backend)
    assert isinstance(outcomes.pop("b"), SessionPersistenceError)
    assert outcomes == {"a": None, "c": None}
    for session_id in ("a", "c"):
        stored = await backend.load_stored(session_id)
        assert stored is not None
        assert [e["seq"] for e in stored.events] == list(range(12))
    assert backend._seen["b"] == 6
