"""R15 on the SQLite backend: the same storage rule as JSONL, and a database swapped under a
live writer."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from sqlite_helpers import backend, db_path, meta, turn, write

from plugins.session_persistence.fsguard import ReplacedFileError, UnsafeStorageError
from plugins.session_persistence_sqlite import SqliteBackend

pytestmark = pytest.mark.anyio

OTHER_UID = 65534


async def stored(tmp_path: Path) -> Path:
    """A database holding session "s1"; its path."""
    b = backend(tmp_path)
    await write(b, meta(), [turn(0)])
    await b.aclose()
    return db_path(tmp_path)


@pytest.mark.parametrize("what", ["folder", "database", "-wal", "-shm"])
async def test_a_foreign_folder_or_file_is_refused(tmp_path: Path, what: str) -> None:
    path = await stored(tmp_path)
    target = {"folder": path.parent, "database": path}.get(what, Path(f"{path}{what}"))
    if not target.exists():
        target.write_bytes(b"")
        os.chmod(target, 0o600)
    os.chown(target, OTHER_UID, OTHER_UID)
    b = backend(tmp_path)
    with pytest.raises(UnsafeStorageError) as caught:
        await b.list()
    assert str(caught.value).startswith(
        f'session storage "{target}" is owned by uid {OTHER_UID}, not by this user'
    )
    await b.aclose()


@pytest.mark.parametrize("what", ["folder", "database", "-wal"])
async def test_group_or_world_writable_is_refused(tmp_path: Path, what: str) -> None:
    path = await stored(tmp_path)
    target = {"folder": path.parent, "database": path}.get(what, Path(f"{path}{what}"))
    target.touch()
    os.chmod(target, 0o777 if what == "folder" else 0o666)
    b = backend(tmp_path)
    with pytest.raises(UnsafeStorageError, match="writable by group or others"):
        await b.load_stored("s1")
    await b.aclose()


async def test_a_symlinked_side_file_is_refused(tmp_path: Path) -> None:
    path = await stored(tmp_path)
    wal = Path(f"{path}-wal")
    if wal.exists():
        wal.unlink()
    elsewhere = tmp_path / "elsewhere-wal"
    elsewhere.write_bytes(b"")
    wal.symlink_to(elsewhere)
    b = backend(tmp_path)
    with pytest.raises(UnsafeStorageError, match="is a symbolic link"):
        await b.list()
    await b.aclose()


async def test_everything_created_is_private_under_a_hostile_umask(tmp_path: Path) -> None:
    path = tmp_path / "home" / "nested" / "sessions.sqlite3"
    old = os.umask(0o277)
    try:
        b = SqliteBackend(path)
        await write(b, meta(), [turn(0)])
    finally:
        os.umask(old)
    for directory in (path.parent, path.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    await b.aclose()


async def test_a_database_replaced_under_a_live_writer_fails_closed(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await b.acquire_writer("s1")
    await write(b, meta(), [turn(0)])
    path = db_path(tmp_path)
    aside = path.with_name("moved.sqlite3")
    path.rename(aside)
    shutil.copy2(aside, path)
    with pytest.raises(ReplacedFileError) as caught:
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert str(caught.value).startswith(f'session storage "{path}" was replaced')
    await b.aclose()
