"""The WAL's blocks reserved at open (docs/performance.md, "A growing WAL's `fsync`"): its bytes
and size untouched, never created, refused through a link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlite_helpers import connect, db_path

from plugins.session_persistence.fsguard import UnsafeStorageError
from plugins.session_persistence.reserve import keep_size_fallocate
from plugins.session_persistence_sqlite import database, walspace
from plugins.session_persistence_sqlite.database import open_database


@pytest.fixture
def reservable(tmp_path: Path) -> None:
    """Skip where this file system (or platform) cannot reserve blocks past a file's end."""
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not keep_size_fallocate(fd, 0, 1 << 20):
            pytest.skip("fallocate(FALLOC_FL_KEEP_SIZE) is not available here")
    finally:
        os.close(fd)
        probe.unlink()


def _wal(tmp_path: Path) -> Path:
    return Path(f"{db_path(tmp_path)}-wal")


@pytest.mark.usefixtures("reservable")
def test_open_reserves_a_full_wal_without_growing_it(tmp_path: Path) -> None:
    connection, _ = open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)
    try:
        full = walspace.wal_bytes(connection)
        assert full == 32 + 1000 * (4096 + 24)  # wal_autocheckpoint's pages, with headers
        st = os.stat(_wal(tmp_path))
        assert st.st_size < full <= st.st_blocks * 512
    finally:
        connection.close()
    assert not _wal(tmp_path).exists()  # SQLite deletes it (and so frees the blocks) as before


@pytest.mark.usefixtures("reservable")
def test_reservation_changes_no_byte_of_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "reserve_wal", lambda connection, path: False)
    connection, _ = open_database(db_path(tmp_path), journal_mode="wal", busy_timeout_ms=5000)
    try:
        connection.execute("INSERT INTO persistence_state (store_id) VALUES ('x')")
        before = _wal(tmp_path).read_bytes()
        blocks = os.stat(_wal(tmp_path)).st_blocks
        assert walspace.reserve_wal(connection, str(db_path(tmp_path)))
        assert _wal(tmp_path).read_bytes() == before
        assert os.stat(_wal(tmp_path)).st_blocks > blocks
        connection.execute("INSERT INTO persistence_state (store_id) VALUES ('y')")
        with connect(tmp_path) as reader:
            assert reader.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert reader.execute("SELECT count(*) FROM persistence_state").fetchone() == (3,)
    finally:
        connection.close()


def test_no_wal_is_created(tmp_path: Path) -> None:
    connection, _ = open_database(db_path(tmp_path), journal_mode="delete", busy_timeout_ms=5000)
    try:
        assert not _wal(tmp_path).exists()
        assert not walspace.reserve_wal(connection, str(db_path(tmp_path)))
        assert not _wal(tmp_path).exists()
    finally:
        connection.close()


def test_a_linked_wal_is_refused(tmp_path: Path) -> None:
    connection, _ = open_database(db_path(tmp_path), journal_mode="delete", busy_timeout_ms=5000)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, _wal(tmp_path))
    try:
        with pytest.raises(UnsafeStorageError):
            walspace.reserve_wal(connection, str(db_path(tmp_path)))
        assert os.stat(target).st_blocks == 0
    finally:
        connection.close()
