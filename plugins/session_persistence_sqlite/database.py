"""Opening the session database: file safety, pragmas read back, and the schema (docs/backends.md).

The folder, the file and its side files follow the storage rule of
`plugins.session_persistence.fsguard` (the folder is created 0700, the file 0600 before SQLite
opens it; neither is ever a symbolic link). Every pragma is set and read back;
switching the journal mode is retried every 10 ms while another connection holds the database,
up to the busy timeout. The schema is created in one transaction on an empty database and
checked (`application_id`, `user_version`) on every open. In WAL mode the WAL's blocks are then
reserved (`walspace`).
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

from plugins.session_persistence import fsguard
from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.home import dsh_home
from plugins.session_persistence_sqlite.walspace import reserve_wal

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "JournalMode",
    "check_schema",
    "default_path",
    "open_database",
    "open_reader",
]

JournalMode = Literal["wal", "delete", "truncate", "persist"]

#: `PRAGMA application_id` of a dsh session database ("DSHP").
APPLICATION_ID: Final = 0x44534850
#: `PRAGMA user_version` of this build's schema (17 was the original's; 18 adds session_locks).
SCHEMA_VERSION: Final = 18

_JOURNAL_RETRY_S: Final = 0.010

_SCHEMA: Final = (
    """CREATE TABLE persistence_state (
        store_id TEXT NOT NULL
    ) STRICT""",
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY NOT NULL,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        cwd TEXT,
        parent_session TEXT,
        seed_length INTEGER,
        origin TEXT,
        delegation_depth INTEGER NOT NULL,
        agent_preset TEXT,
        incarnation TEXT NOT NULL,
        revision INTEGER NOT NULL,
        next_seq INTEGER NOT NULL
    ) STRICT""",
    """CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time INTEGER NOT NULL,
        data ANY NOT NULL,
        source_event_seqs BLOB,
        surface_op TEXT,
        ignorable INTEGER,
        key_order INTEGER,
        PRIMARY KEY (session_id, seq)
    ) STRICT""",
    """CREATE TABLE session_locks (
        session_id TEXT PRIMARY KEY NOT NULL,
        token TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        heartbeat_at INTEGER NOT NULL
    ) STRICT""",
)


def default_path() -> Path:
    """`$DSH_HOME/sessions.sqlite3` (`DSH_HOME` as `plugins.session_persistence.home` resolves
    it)."""
    return dsh_home() / "sessions.sqlite3"


def _error(path: Path, what: str) -> SessionPersistenceError:
    return SessionPersistenceError(f'session database at "{path}": {what}')


#: The files SQLite keeps beside the database (each checked by the storage rule when present).
_SIDE_FILES: Final = ("-wal", "-shm", "-journal")


def _prepare_file(path: Path) -> None:
    """The storage rule (docs/storage-safety.md) with the database's folder as the root: the
    folder (created 0700) and the database file (created 0600) and its side files owned by this
    user, writable by nobody else, never symbolic links."""
    parent = str(path.parent)
    fsguard.make_dirs(parent)
    fsguard.check_path(parent, parent)
    try:
        fd = fsguard.open_file(str(path), os.O_RDWR)
    except fsguard.UnsafeStorageError:
        raise
    except OSError as error:
        raise _error(path, f"cannot open the file: {error}") from error
    os.close(fd)
    for suffix in _SIDE_FILES:
        try:
            fsguard.check_file(f"{path}{suffix}")
        except FileNotFoundError:
            continue


def _session_pragmas(connection: sqlite3.Connection, path: Path, busy_timeout_ms: int) -> None:
    """The settings every connection of ours runs with, writer or reader."""
    _pragma(connection, path, "busy_timeout", busy_timeout_ms)
    _pragma(connection, path, "foreign_keys", 1)
    _pragma(connection, path, "trusted_schema", 0)
    _pragma(connection, path, "mmap_size", 0)


def _pragma(connection: sqlite3.Connection, path: Path, name: str, value: object) -> None:
    """Set a pragma and read it back."""
    connection.execute(f"PRAGMA {name} = {value}")
    (got,) = connection.execute(f"PRAGMA {name}").fetchone()
    if got != value:
        raise _error(path, f"PRAGMA {name} reads back {got!r}, expected {value!r}")


def _journal_mode(
    connection: sqlite3.Connection, path: Path, mode: JournalMode, busy_timeout_ms: int
) -> None:
    """Switch the journal mode, retrying every 10 ms while the database is busy."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            (got,) = connection.execute(f"PRAGMA journal_mode = {mode}").fetchone()
            break
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() >= deadline:
                raise _error(path, f"cannot set journal_mode {mode}: {error}") from error
            time.sleep(_JOURNAL_RETRY_S)
    if str(got).lower() != mode:
        raise _error(path, f"PRAGMA journal_mode reads back {got!r}, expected {mode!r}")


def check_schema(connection: sqlite3.Connection, path: Path) -> None:
    """Refuse a database that is not ours or has another schema version."""
    application_id, version = connection.execute(
        "SELECT (SELECT application_id FROM pragma_application_id),"
        " (SELECT user_version FROM pragma_user_version)"
    ).fetchone()
    if application_id != APPLICATION_ID:
        raise _error(path, f"not a dsh session database (application_id {application_id:#x})")
    if version != SCHEMA_VERSION:
        raise SessionPersistenceError(
            f'session database at "{path}" has schema version {version}, '
            f"incompatible with this build ({SCHEMA_VERSION})"
        )


def _ensure_schema(connection: sqlite3.Connection, path: Path) -> str:
    """Create the schema on an empty database, check it otherwise; returns the store id."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        application_id, tables = connection.execute(
            "SELECT (SELECT application_id FROM pragma_application_id),"
            " (SELECT count(*) FROM sqlite_schema)"
        ).fetchone()
        if application_id == 0 and tables == 0:
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO persistence_state (store_id) VALUES (?)", (str(uuid.uuid4()),)
            )
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        check_schema(connection, path)
        row = connection.execute("SELECT store_id FROM persistence_state").fetchone()
        if row is None:
            raise _error(path, "persistence_state holds no store id")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return str(row[0])


def open_database(
    path: Path, *, journal_mode: JournalMode, busy_timeout_ms: int
) -> tuple[sqlite3.Connection, str]:
    """A configured connection (autocommit; transactions are explicit) and the store id.

    The connection may be used from any one thread at a time (`check_same_thread=False`); the
    backend serializes every use.
    """
    _prepare_file(path)
    connection = sqlite3.connect(
        path,
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        _session_pragmas(connection, path, busy_timeout_ms)
        _journal_mode(connection, path, journal_mode, busy_timeout_ms)
        _pragma(connection, path, "synchronous", 2)
        store_id = _ensure_schema(connection, path)
        if journal_mode == "wal":
            reserve_wal(connection, str(path))
    except BaseException:
        connection.close()
        raise
    return connection, store_id


def _check_existing(path: Path) -> bool:
    """The storage rule for a database that is only read: False when the file does not exist."""
    parent = str(path.parent)
    if not fsguard.check_path(parent, str(path)):
        return False
    for suffix in _SIDE_FILES:
        try:
            fsguard.check_file(f"{path}{suffix}")
        except FileNotFoundError:
            continue
    return True


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _has_wal(path: Path) -> bool:
    try:
        return os.stat(f"{path}-wal").st_size > 0
    except FileNotFoundError:
        return False


def open_reader(path: Path, *, busy_timeout_ms: int) -> tuple[sqlite3.Connection, str] | None:
    """A read-only connection and the store id, creating and changing nothing; None when there
    is no database file. On a read-only file system, where SQLite cannot create the WAL index,
    a database without a write-ahead log is opened as immutable (nothing can change it there);
    one whose log holds transactions but lacks its index is refused (immutable would skip
    them)."""
    if not _check_existing(path):
        return None
    uri = f"file:{quote(str(path))}?mode=ro"
    connection = None
    for immutable in (False, True):
        connection = sqlite3.connect(
            uri + ("&immutable=1" if immutable else ""),
            uri=True,
            timeout=busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            _session_pragmas(connection, path, busy_timeout_ms)
            check_schema(connection, path)
            row = connection.execute("SELECT store_id FROM persistence_state").fetchone()
        except sqlite3.OperationalError as error:
            connection.close()
            if immutable or not _read_only_file_system(path):
                raise _error(path, f"cannot open it for reading: {error}") from None
            if _has_wal(path):  # immutable would ignore committed transactions in the WAL
                raise _error(
                    path,
                    "cannot be read on this read-only file system: its write-ahead log holds "
                    "committed transactions but its index (-shm) is missing; open it once "
                    "where it is writable",
                ) from None
            continue
        except BaseException:
            connection.close()
            raise
        if row is None:
            connection.close()
            raise _error(path, "persistence_state holds no store id")
        return connection, str(row[0])
    raise AssertionError("unreachable")
