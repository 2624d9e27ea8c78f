"""Opening the session database: file safety, pragmas read back, and the schema (spec 02 §7).

The file lives in an owner-only directory (created 0700 when missing), is a 0600 regular file
(created so before SQLite opens it) and never a symbolic link. Every pragma is set and read back;
switching the journal mode is retried every 10 ms while another connection holds the database,
up to the busy timeout. The schema is created in one transaction on an empty database and
checked (`application_id`, `user_version`) on every open.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import uuid
from pathlib import Path
from typing import Final, Literal

from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.home import dsh_home

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "JournalMode",
    "check_schema",
    "default_path",
    "open_database",
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


def _prepare_file(path: Path) -> None:
    """Owner-only parent directory, then a 0600 regular file that is not a symlink."""
    parent = path.parent
    if not os.path.lexists(parent):
        os.makedirs(parent, mode=0o700, exist_ok=True)
    st = os.stat(parent)
    if not stat.S_ISDIR(st.st_mode):
        raise _error(path, f'"{parent}" is not a directory')
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise _error(
            path,
            f'its directory "{parent}" must be owned by this user and owner-only (0700), '
            f"found mode {stat.S_IMODE(st.st_mode):04o}",
        )
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as error:
        if os.path.islink(path):
            raise _error(path, "the file is a symbolic link; refusing it") from None
        raise _error(path, f"cannot open the file: {error}") from error
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode):
        raise _error(path, "not a regular file")
    if stat.S_IMODE(st.st_mode) != 0o600:
        raise _error(path, f"the file must have mode 0600, found {stat.S_IMODE(st.st_mode):04o}")


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
        _pragma(connection, path, "busy_timeout", busy_timeout_ms)
        _pragma(connection, path, "foreign_keys", 1)
        _pragma(connection, path, "trusted_schema", 0)
        _pragma(connection, path, "mmap_size", 0)
        _journal_mode(connection, path, journal_mode, busy_timeout_ms)
        _pragma(connection, path, "synchronous", 2)
        store_id = _ensure_schema(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection, store_id
