"""Opening the database: schema, pragmas read back, journal modes, file and directory safety."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlite_helpers import backend, connect, db_path, meta, turn, write

from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.fsguard import UnsafeStorageError
from plugins.session_persistence_sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteBackend
from plugins.session_persistence_sqlite.database import open_database

pytestmark = pytest.mark.anyio


def test_schema_is_strict_with_our_ids(tmp_path: Path) -> None:
    connection, store_id = open_database(
        db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000
    )
    connection.close()
    with connect(tmp_path) as db:
        assert db.execute("PRAGMA application_id").fetchone() == (0x44534850,) == (APPLICATION_ID,)
        assert db.execute("PRAGMA user_version").fetchone() == (18,) == (SCHEMA_VERSION,)
        tables = dict(db.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'"))
        assert set(tables) == {"persistence_state", "sessions", "events", "session_locks"}
        assert all(sql.rstrip().endswith("STRICT") for sql in tables.values())
        assert "ON DELETE CASCADE" in tables["events"]
        assert db.execute("SELECT store_id FROM persistence_state").fetchall() == [(store_id,)]
        with pytest.raises(sqlite3.IntegrityError):  # STRICT: no text in an INTEGER column
            db.execute("INSERT INTO session_locks VALUES ('x', 't', 'pid', 'h', 0)")
    again, same = open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)
    again.close()
    assert same == store_id


@pytest.mark.parametrize("mode", ["wal", "delete", "truncate", "persist"])
def test_pragmas_are_set_and_read_back(tmp_path: Path, mode: str) -> None:
    connection, _ = open_database(db_path(tmp_path), journal_mode=mode, busy_timeout_ms=1234)  # type: ignore[arg-type]
    try:
        read = {
            name: connection.execute(f"PRAGMA {name}").fetchone()[0]
            for name in (
                "foreign_keys",
                "trusted_schema",
                "mmap_size",
                "journal_mode",
                "synchronous",
                "busy_timeout",
            )
        }
    finally:
        connection.close()
    assert read == {
        "foreign_keys": 1,
        "trusted_schema": 0,
        "mmap_size": 0,
        "journal_mode": mode,
        "synchronous": 2,
        "busy_timeout": 1234,
    }


def test_journal_mode_switch_is_retried_while_busy(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    open_database(path, journal_mode="delete", busy_timeout_ms=5000)[0].close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    released = threading.Timer(0.1, holder.execute, ("COMMIT",))
    released.start()
    started = time.monotonic()
    connection, _ = open_database(path, journal_mode="wal", busy_timeout_ms=5000)
    assert time.monotonic() - started >= 0.09
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()
    released.join()
    holder.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with pytest.raises(SessionPersistenceError, match="cannot set journal_mode delete"):
        open_database(path, journal_mode="delete", busy_timeout_ms=50)
    holder.close()


def test_incompatible_schema_version_is_refused(tmp_path: Path) -> None:
    open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)[0].close()
    with connect(tmp_path) as db:
        db.execute("PRAGMA user_version = 17")
    with pytest.raises(SessionPersistenceError) as caught:
        open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)
    assert str(caught.value) == (
        f'session database at "{db_path(tmp_path)}" has schema version 17, '
        "incompatible with this build (18)"
    )


def test_foreign_database_is_refused(tmp_path: Path) -> None:
    with connect(tmp_path) as db:
        db.execute("CREATE TABLE t (x)")
    os.chmod(db_path(tmp_path), 0o600)
    with pytest.raises(SessionPersistenceError, match="not a dsh session database"):
        open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)


def test_file_and_directory_modes(tmp_path: Path) -> None:
    path = tmp_path / "home" / "nested" / "sessions.sqlite3"
    open_database(path, journal_mode="wal", busy_timeout_ms=5000)[0].close()
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    os.chmod(path, 0o664)
    with pytest.raises(UnsafeStorageError, match=r"writable by group or others \(mode 0664\)"):
        open_database(path, journal_mode="wal", busy_timeout_ms=5000)
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o775)
    with pytest.raises(UnsafeStorageError, match=f"chmod 700 '{path.parent}'"):
        open_database(path, journal_mode="wal", busy_timeout_ms=5000)


def test_symlinks_and_non_files_are_refused(tmp_path: Path) -> None:
    target = db_path(tmp_path)
    open_database(target, journal_mode="wal", busy_timeout_ms=5000)[0].close()
    link = target.parent / "link.sqlite3"
    link.symlink_to(target)
    with pytest.raises(SessionPersistenceError, match="symbolic link"):
        open_database(link, journal_mode="wal", busy_timeout_ms=5000)
    directory = target.parent / "dir.sqlite3"
    directory.mkdir()
    with pytest.raises(SessionPersistenceError, match="cannot open the file"):
        open_database(directory, journal_mode="wal", busy_timeout_ms=5000)


def test_relative_paths_are_refused_and_home_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="must be absolute"):
        SqliteBackend("sessions.sqlite3")
    monkeypatch.setenv("HOME", "/home/someone")
    assert SqliteBackend("~/x.sqlite3").path == Path("/home/someone/x.sqlite3")


async def test_wal_side_files_are_owner_only(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    side = [Path(f"{db_path(tmp_path)}{suffix}") for suffix in ("-wal", "-shm")]
    assert [p.stat().st_mode & 0o777 for p in side] == [0o600, 0o600]
    await b.aclose()


async def test_every_batch_rechecks_the_schema(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    with connect(tmp_path) as db:
        db.execute("PRAGMA user_version = 19")
    with pytest.raises(SessionPersistenceError, match="has schema version 19"):
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    await b.aclose()
