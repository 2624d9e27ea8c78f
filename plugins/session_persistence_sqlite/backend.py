"""The SQLite storage engine: every session in one database file (docs/backends.md).

Threading: the stdlib `sqlite3` connection is used by one thread at a time. Every operation
(row encoding included) runs on the backend's long-lived I/O thread (`offload.IoThread`), one
call at a time in submission order, so asyncio and trio behave alike; only a live session's
append may run on the loop thread instead, while the inline gate allows it (`inline.InlineGate`,
off by default). The connection is opened with `check_same_thread=False` because that thread is
replaced after an idle spell. A `threading.Lock` serializes those calls with the lock heartbeat
thread. Cancelling a caller never abandons a running statement (the I/O thread finishes its
transaction first).
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Final, TypeVar, overload

import anyio
import anyio.to_thread

from plugins.session_persistence import fsguard
from plugins.session_persistence.ahead import Handoff
from plugins.session_persistence.backend import (
    JsonObject,
    LiveEncoder,
    Location,
    Owner,
    SetAside,
    Snapshot,
    StoredLog,
)
from plugins.session_persistence.base import BackendBase
from plugins.session_persistence.errors import (
    SessionExistsError,
    SessionPersistenceError,
    StaleWriterError,
)
from plugins.session_persistence.header import header_columns, meta_of_columns
from plugins.session_persistence.inline import InlineGate
from plugins.session_persistence.offload import Call, IoThread

from .database import JournalMode, check_schema, open_database, open_reader
from .locks import (
    HEARTBEAT_S,
    HOST,
    STALE_MS,
    Heartbeat,
    check_lock,
    live_holder,
    new_token,
    now_ms,
    recorded_holder,
)
from .rows import Ahead, Row, encode_rows, scan

__all__ = ["SqliteBackend"]

T = TypeVar("T")

#: The header columns in `HEADER_KEYS` order (`meta_of_columns` reads them back by position).
_HEADER_COLUMNS: Final = (
    "version, id, created_at, cwd, parent_session, seed_length, origin, delegation_depth,"
    " agent_preset"
)
_ROW_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op, ignorable, key_order"
_INSERT_ROWS: Final = (
    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op,"
    " ignorable, key_order) VALUES "
)
#: At most this many rows per `INSERT` (9 parameters each, under SQLite's oldest limit of 999).
_ROWS_PER_INSERT: Final = 100
#: A live writer's append in one statement: it advances the session row only when the stored
#: next seq is the one this process last saw and the lock row still carries its token, and
#: changes a row only then (otherwise `_append_batch` runs the reads that name the failure).
#: The cursor's `rowcount` tells which (a `RETURNING` clause cost 15% of the transaction's CPU).
_ADVANCE: Final = (
    "UPDATE sessions SET revision = revision + 1, next_seq = ? WHERE id = ? AND next_seq = ?"
    " AND EXISTS (SELECT 1 FROM session_locks WHERE session_id = ? AND token = ?)"
)


#: Sessions advanced together by one `UPDATE` of a group (4 parameters each).
_SESSIONS_PER_ADVANCE: Final = 200
#: `_ADVANCE` for many live writers at once (`_advance_together`): the ids it advanced.
_ADVANCE_MANY: Final = (
    "UPDATE sessions SET revision = revision + 1, next_seq = v.column3 FROM (VALUES {}) AS v"
    " WHERE sessions.id = v.column1 AND sessions.next_seq = v.column2 AND EXISTS"
    " (SELECT 1 FROM session_locks WHERE session_id = v.column1 AND token = v.column4)"
    " RETURNING id"
)


#: One event row's values. `sqlite3` binds an `int`, a `str` or a `bytearray` as it is but sends
#: None and `bytes` through its adapter lookup, whose failed attribute lookups cost more than the
#: rest of the bind, so `_insert_rows` binds a blob as a `bytearray` and a nullable column's NULL
#: as `_NULL`, which `NULLIF` turns back into NULL (no value of these columns is that integer:
#: blobs, texts, and 0 or 1); the stored values are the same (docs/performance.md).
_ROW_VALUES: Final = "(?, ?, ?, ?, ?, NULLIF(?, -1), NULLIF(?, -1), NULLIF(?, -1), NULLIF(?, -1))"
_NULL: Final = -1


@lru_cache(maxsize=_ROWS_PER_INSERT)
def _insert_sql(count: int) -> str:
    """One `INSERT` of `count` event rows."""
    return _INSERT_ROWS + ", ".join((_ROW_VALUES,) * count)


@lru_cache(maxsize=_SESSIONS_PER_ADVANCE)
def _advance_sql(count: int) -> str:
    """One `_ADVANCE_MANY` of `count` sessions."""
    return _ADVANCE_MANY.format(", ".join(("(?, ?, ?, ?)",) * count))


def _insert_rows(
    connection: sqlite3.Connection | sqlite3.Cursor, batches: Iterable[tuple[str, Sequence[Row]]]
) -> None:
    """Insert each `(session_id, rows)` batch, up to `_ROWS_PER_INSERT` rows a statement, bound
    as `_ROW_VALUES` says."""
    params: list[object] = []
    count = 0
    for session_id, rows in batches:
        for seq, kind, at, data, seqs, op, ignorable, key_order in rows:
            params += (
                session_id,
                seq,
                kind,
                at,
                data if isinstance(data, str) else bytearray(data),
                _NULL if seqs is None else bytearray(seqs),
                _NULL if op is None else op,
                _NULL if ignorable is None else ignorable,
                _NULL if key_order is None else key_order,
            )
            count += 1
            if count == _ROWS_PER_INSERT:
                connection.execute(_insert_sql(count), params)
                params, count = [], 0
    if count:
        connection.execute(_insert_sql(count), params)


class _Live:
    """A queued live append a group may run together with others: its call, session, the
    next seq this process saw, the next seq after it, its lock token and its encoded rows."""

    __slots__ = ("call", "next_seq", "rows", "seen", "session_id", "token")

    def __init__(
        self, call: Call[Any], session_id: str, seen: int, count: int, token: str, rows: list[Row]
    ) -> None:
        self.call = call
        self.session_id = session_id
        self.seen = seen
        self.next_seq = seen + count
        self.token = token
        self.rows = rows


class SqliteBackend(BackendBase):
    """Session logs in one SQLite database at `path` (created on first use).

    `journal_mode` defaults to WAL; `busy_timeout_ms` bounds every wait for another
    connection's lock. `heartbeat_s` and `stale_ms` are the writer-lock timings; `host` is the
    name lock rows record (this machine's; tests pass another to play a second host).
    """

    name: str = "session-persistence-sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        journal_mode: JournalMode = "wal",
        busy_timeout_ms: int = 5000,
        heartbeat_s: float = HEARTBEAT_S,
        stale_ms: int = STALE_MS,
        host: str = HOST,
        inline_write_max_ms: float = 0.0,
    ) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_absolute():
            raise ValueError(f"the session database path must be absolute, got {str(path)!r}")
        self.journal_mode: Final = journal_mode
        self.busy_timeout_ms: Final = busy_timeout_ms
        self._heartbeat_s = heartbeat_s
        self._stale_ms = stale_ms
        self._host = host
        self._connection: sqlite3.Connection | None = None
        #: A cursor of `_connection` that runs the statements of its transactions
        #: (`connection.execute` makes and drops a cursor per statement).
        self._cursor: sqlite3.Cursor | None = None
        #: Whether `_connection` is read-only (opened by a read; the first write reopens it).
        self._reading = False
        self._store_id = ""
        #: `path` as text (`os.lstat` of a `Path` calls its `__fspath__` first).
        self._file = str(self.path)
        #: (st_dev, st_ino) of the database file the connection opened.
        self._identity = (0, 0)
        #: `PRAGMA data_version` when the open connection last checked the schema (None: not
        #: since it opened); see `_check_schema`.
        self._schema_seen: int | None = None
        self._mutex = threading.RLock()
        #: True while a group commit's transaction is open (its calls use savepoints).
        self._grouped = False
        self.inline_gate = InlineGate(inline_write_max_ms)
        self._thread = IoThread(
            f"dsh-sqlite {path}", group=self._commit_group, gate=self.inline_gate
        )
        self._heartbeat: list[Heartbeat] = []
        #: session id -> the lock token this instance holds.
        self._tokens: dict[str, str] = {}
        #: session id -> the stored next seq this process last saw (the stale-writer check).
        self._seen: dict[str, int] = {}
        #: session id -> the rows its live encoder prepared, handed to the write in progress.
        self._handoff: dict[str, Ahead] = {}

    # ---- Protocol ------------------------------------------------------------------------

    def locate(self, meta: JsonObject) -> Location:
        """The database holding every session (no I/O)."""
        return Location("database", str(self.path))

    async def load_stored(self, session_id: str) -> StoredLog | None:
        """Read and decode a session's rows; None when nothing is stored."""
        return await self._run(self._load_stored, session_id, read=True)

    async def read_stored_revision(self, session_id: str) -> str | None:
        """`sqlite:<store_id>:<incarnation>:<revision>`, None when nothing is stored."""
        return await self._run(self._read_stored_revision, session_id, read=True)

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        """One `BEGIN IMMEDIATE` transaction: checks, the session row on first write, rows
        (those a live session's encoder prepared taken as they are: `ahead.Handoff`)."""
        ahead = self._handoff.pop(meta["id"], None)
        if events or not is_materialized:
            args = (meta, list(events), is_materialized, ahead)
            await self._thread.run(
                self._call, self._append_batch, args, False, group=True, inline=is_materialized
            )

    def live_encoder(self) -> LiveEncoder:
        """A live session's writes, its rows made as its events are admitted."""
        return Handoff(self, self._handoff, Ahead(), self._append_inline)

    def _append_inline(
        self, meta: JsonObject, events: builtins.list[JsonObject], ahead: Ahead
    ) -> bool:
        """A live session's materialized append right here, when the inline gate allows it
        now (`ahead.Handoff.append_inline`); False: nothing was done."""
        args = (meta, events, True, ahead)
        return self._thread.try_inline(self._call, self._append_batch, args, False)

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        """One transaction inserting `closers` (rows never tear, so there is no tail to cut)."""
        if marker is not None:
            raise TypeError(f"SQLite logs have no torn tail to cut: {marker!r}")
        if closers:
            await self._run(self._commit_repair, meta["id"], list(closers))
        return None

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        """Headers with revisions, by `(createdAt, id)`."""
        return await self._run(self._list_snapshots, read=True) or []

    async def delete_stored(self, session_id: str) -> bool:
        """Delete the session row (its events go with it) in one transaction under the lock."""
        return await self._run(self._delete_stored, session_id)

    async def acquire_writer(self, session_id: str) -> None:
        """Insert (or take over a dead holder's) lock row; re-entrant per instance. Grouped
        with the other sessions' queued writes (one commit for many: a thousand sessions
        starting at once would otherwise pay a thousand fsyncs in a row)."""
        if session_id not in self._tokens:
            await self._thread.run(
                self._call, self._acquire_writer, (session_id,), False, group=True
            )

    async def owner(self, session_id: str) -> Owner | None:
        """The holder of `session_id`'s lock row while it is live (its pid on this host, or a
        fresh heartbeat), unless it is this instance."""
        if session_id in self._tokens:
            return None
        return await self._run(live_holder, session_id, self._stale_ms, read=True)

    async def lock_record(self, session_id: str) -> Owner | None:
        """The holder the lock row records (a crashed writer's row stays until taken over)."""
        return await self._run(recorded_holder, session_id, read=True)

    async def release_writer(self, session_id: str) -> None:
        """Delete this instance's lock row (no-op when not held)."""
        token = self._tokens.pop(session_id, None)
        if token is not None:
            await self._thread.run(
                self._call, self._release_lock, (session_id, token), False, group=True
            )

    async def store_identity(self) -> str:
        """The `persistence_state.store_id` of the database (opening it if needed)."""
        if not self._store_id:
            await self._run(lambda _connection: None)
        return self._store_id

    async def aclose(self) -> None:
        """Release every lock, stop the heartbeat, close the connection and let the I/O thread
        go."""
        while self._heartbeat:
            await anyio.to_thread.run_sync(self._heartbeat.pop().stop)
        held = dict(self._tokens)
        self._tokens.clear()
        if self._connection is not None:
            await self._run(self._close, held, read=True)
        self._thread.close()

    # ---- plumbing ------------------------------------------------------------------------

    @overload
    async def _run(self, fn: Callable[..., T], *args: Any) -> T: ...
    @overload
    async def _run(self, fn: Callable[..., T], *args: Any, read: bool) -> T | None: ...
    async def _run(self, fn: Callable[..., T], *args: Any, read: bool = False) -> T | None:
        """Run `fn(connection, *args)` on the backend's I/O thread, one call at a time. A `read`
        runs on a read-only connection until the first write needs a writable one, and returns
        None when there is no database file (nothing is created)."""
        return await self._thread.run(self._call, fn, args, read)

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], read: bool) -> T | None:
        """`fn` on the right connection; SQLite's own errors become one clear error naming
        the database and SQLite's error name (e.g. `SQLITE_FULL`, `SQLITE_IOERR_SHMSIZE`)."""
        with self._mutex:
            try:
                connection = self._connect(read)
                return None if connection is None else fn(connection, *args)
            except sqlite3.Error as error:
                name = getattr(error, "sqlite_errorname", None) or type(error).__name__
                raise SessionPersistenceError(
                    f'session database at "{self.path}": {name}: {error}'
                ) from error

    def _connect(self, read: bool) -> sqlite3.Connection | None:
        """The open connection, opened (read-only for a `read`) or reopened read-write for the
        first write; None for a read when there is no database file."""
        if self._connection is not None and self._reading and not read:
            self._connection.close()
            self._connection = None
        if self._connection is None:
            if read:
                opened = open_reader(self.path, busy_timeout_ms=self.busy_timeout_ms)
                if opened is None:
                    return None
            else:
                opened = open_database(
                    self.path,
                    journal_mode=self.journal_mode,
                    busy_timeout_ms=self.busy_timeout_ms,
                )
            self._connection, self._store_id = opened
            self._cursor = self._connection.cursor()
            self._reading = read
            self._schema_seen = None
            st = os.lstat(self.path)
            self._identity = (st.st_dev, st.st_ino)
        return self._connection

    def _transaction(
        self, connection: sqlite3.Connection, body: Callable[[], T], *, write: bool = True
    ) -> T:
        """Run `body` in one transaction; any failure (COMMIT's too) rolls it back. A write
        first checks that the path still names the database this connection opened."""
        if self._grouped:
            return self._savepoint(connection, body)
        if write:
            self._check_identity()
        cursor = self._cursor
        assert cursor is not None
        assert cursor.connection is connection
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = body()
            cursor.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return result

    @staticmethod
    def _savepoint(connection: sqlite3.Connection, body: Callable[[], T]) -> T:
        """`body` inside the open group transaction: its failure undoes its own writes only."""
        connection.execute("SAVEPOINT batch")
        try:
            result = body()
        except BaseException:
            connection.execute("ROLLBACK TO batch")
            connection.execute("RELEASE batch")
            raise
        connection.execute("RELEASE batch")
        return result

    def _commit_group(self, calls: Sequence[Call[Any]]) -> None:
        """Group commit: the queued appends and lock changes of many sessions in one
        transaction (one fsync).

        Each call keeps its own checks (next seq, writer lock) inside a savepoint, so a bad
        one fails alone; a failed COMMIT fails them all and forgets what they advanced and the
        locks they took (release_writer forgets its token before it is queued, as before)."""
        with self._mutex:
            seen, tokens = dict(self._seen), dict(self._tokens)
            connection: sqlite3.Connection | None = None
            try:
                connection = self._connect(False)
                assert connection is not None
                self._check_identity()
                connection.execute("BEGIN IMMEDIATE")
                self._grouped = True
                together: list[_Live] = []
                for call in calls:
                    live = self._live(call)
                    if live is not None:
                        together.append(live)
                        continue
                    self._advance_together(connection, together)
                    together = []
                    self._check_open(connection)
                    call.execute()
                self._advance_together(connection, together)
                connection.execute("COMMIT")
            except BaseException as error:
                self._seen.clear()
                self._seen.update(seen)
                for session_id, token in list(self._tokens.items()):
                    if tokens.get(session_id) != token:  # taken in this group: not committed
                        self._tokens.pop(session_id, None)
                if connection is not None and connection.in_transaction:
                    connection.execute("ROLLBACK")
                if isinstance(error, sqlite3.Error):
                    name = getattr(error, "sqlite_errorname", None) or type(error).__name__
                    raise SessionPersistenceError(
                        f'session database at "{self.path}": {name}: {error}'
                    ) from error
                raise
            finally:
                self._grouped = False

    def _check_open(self, connection: sqlite3.Connection) -> None:
        """Raise when SQLite rolled the whole group transaction back (a full disk, an I/O
        error)."""
        if not connection.in_transaction:
            raise SessionPersistenceError(
                f'session database at "{self.path}": the group transaction was rolled back'
            )

    def _live(self, call: Call[Any]) -> _Live | None:
        """`call` as a live append `_advance_together` may run (a session this instance
        holds, appending where it last saw the log end), its rows encoded; else None."""
        fn = call.fn
        if not isinstance(fn, partial) or fn.args[:1] != (self._append_batch,):
            return None
        meta, events, is_materialized, ahead = fn.args[1]
        session_id: str = meta["id"]
        seen, token = self._seen.get(session_id), self._tokens.get(session_id)
        if not is_materialized or token is None or not events or events[0]["seq"] != seen:
            return None
        assert seen is not None
        try:
            rows = encode_rows(events, ahead)
        except Exception:  # the call alone raises it again, as it always did
            return None
        return _Live(call, session_id, seen, len(events), token, rows)

    def _advance_together(self, connection: sqlite3.Connection, together: list[_Live]) -> None:
        """Live appends of a group set-wise: one `UPDATE` advances every session whose stored
        next seq and lock row agree, then their rows go in together (docs/performance.md).
        A session it did not advance, or a statement that failed, is run on its own, so its
        own checks name what is wrong and a bad one fails alone."""
        if len(together) < 2:
            for live in together:
                self._check_open(connection)
                live.call.execute()
            return
        self._check_open(connection)
        start = time.perf_counter()
        advanced: set[str] = set()
        try:
            self._check_schema(connection)
            connection.execute("SAVEPOINT together")
            for index in range(0, len(together), _SESSIONS_PER_ADVANCE):
                chunk = together[index : index + _SESSIONS_PER_ADVANCE]
                params = [
                    value
                    for live in chunk
                    for value in (live.session_id, live.seen, live.next_seq, live.token)
                ]
                advanced.update(
                    row[0] for row in connection.execute(_advance_sql(len(chunk)), params)
                )
            _insert_rows(
                connection,
                ((live.session_id, live.rows) for live in together if live.session_id in advanced),
            )
            connection.execute("RELEASE together")
        except sqlite3.Error:
            if connection.in_transaction:
                connection.execute("ROLLBACK TO together")
                connection.execute("RELEASE together")
            advanced.clear()
        elapsed = time.perf_counter() - start
        for live in together:
            call = live.call
            if live.session_id in advanced:
                self._seen[live.session_id] = live.next_seq
                call.elapsed = elapsed
            else:
                self._check_open(connection)
                call.execute()

    def _check_identity(self) -> None:
        """Raise `ReplacedFileError` when the database path no longer names the opened file (a
        `mv`, then a copy put back: the connection would go on writing the orphan)."""
        try:
            st = os.lstat(self._file)
        except FileNotFoundError:
            raise fsguard.ReplacedFileError(str(self.path)) from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise fsguard.ReplacedFileError(str(self.path))

    def _check_schema(self, connection: sqlite3.Connection) -> None:
        """`check_schema` inside a write transaction, skipped while no other connection has
        committed since this one last checked: `PRAGMA data_version` changes only then, and
        only another connection can change the schema."""
        cursor = self._cursor
        assert cursor is not None
        (version,) = cursor.execute("PRAGMA data_version").fetchone()
        if version != self._schema_seen:
            check_schema(connection, self.path)
            self._schema_seen = version

    def _revision(self, incarnation: str, revision: int) -> str:
        return f"sqlite:{self._store_id}:{incarnation}:{revision}"

    # ---- reads ---------------------------------------------------------------------------

    def _load_stored(self, connection: sqlite3.Connection, session_id: str) -> StoredLog | None:
        def read() -> tuple[Any, builtins.list[Row]] | None:
            head = connection.execute(
                f"SELECT {_HEADER_COLUMNS}, incarnation, revision, next_seq"
                " FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if head is None or head[0] != 0:
                return None if head is None else (head, [])
            rows = connection.execute(
                f"SELECT {_ROW_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            return head, rows

        found = self._transaction(connection, read, write=False)
        if found is None:
            return None
        head, rows = found
        meta = meta_of_columns(head[:9])
        incarnation, revision, next_seq = head[9], head[10], head[11]
        if meta["version"] != 0:
            return StoredLog(meta, [], self._revision(incarnation, revision))
        events = scan(rows, next_seq)
        self._seen[session_id] = next_seq
        return StoredLog(meta, events, self._revision(incarnation, revision))

    def _read_stored_revision(self, connection: sqlite3.Connection, session_id: str) -> str | None:
        row = connection.execute(
            "SELECT incarnation, revision FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return None if row is None else self._revision(row[0], row[1])

    def _list_snapshots(self, connection: sqlite3.Connection) -> builtins.list[Snapshot]:
        rows = connection.execute(
            f"SELECT {_HEADER_COLUMNS}, incarnation, revision FROM sessions ORDER BY created_at, id"
        ).fetchall()
        return [Snapshot(meta_of_columns(row[:9]), self._revision(row[9], row[10])) for row in rows]

    # ---- writes --------------------------------------------------------------------------

    @staticmethod
    def _starts_at(session_id: str, first: int | None, stored: int) -> None:
        if first is not None and first != stored:
            raise SessionPersistenceError(
                f"session {session_id} append starts at seq {first}, stored next seq is {stored}"
            )

    def _append_batch(
        self,
        connection: sqlite3.Connection,
        meta: JsonObject,
        events: builtins.list[JsonObject],
        is_materialized: bool,
        ahead: Ahead | None = None,
    ) -> None:
        session_id: str = meta["id"]
        rows = encode_rows(events, ahead)
        first = events[0]["seq"] if events else None
        count = len(events)

        def write() -> int:
            self._check_schema(connection)
            seen, token = self._seen.get(session_id), self._tokens.get(session_id)
            if is_materialized and token is not None and seen is not None and first == seen:
                advance = (seen + count, session_id, seen, session_id, token)
                cursor = self._cursor
                assert cursor is not None
                if cursor.execute(_ADVANCE, advance).rowcount == 1:
                    _insert_rows(cursor, ((session_id, rows),))
                    return seen + count
            # Creating the log, a one-off write, or a check that failed: read what is stored
            # and name what is wrong.
            stored = connection.execute(
                "SELECT next_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if not is_materialized:
                if stored is not None:
                    raise SessionExistsError(
                        f'session "{session_id}" already has a persisted log in "{self.path}" '
                        "(another writer created it first)"
                    )
                next_seq = 0
            elif stored is None or stored[0] != self._seen.get(session_id):
                raise StaleWriterError(session_id)
            else:
                next_seq = stored[0]
            self._starts_at(session_id, first, next_seq)
            check_lock(
                connection,
                session_id,
                self._tokens.get(session_id),
                host=self._host,
                stale_ms=self._stale_ms,
            )
            if is_materialized:
                connection.execute(
                    "UPDATE sessions SET revision = revision + 1, next_seq = ? WHERE id = ?",
                    (next_seq + count, session_id),
                )
            else:
                connection.execute(
                    f"INSERT INTO sessions ({_HEADER_COLUMNS}, incarnation, revision, next_seq)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                    (*header_columns(meta).values(), str(uuid.uuid4()), count),
                )
            _insert_rows(connection, ((session_id, rows),))
            return next_seq + count

        self._seen[session_id] = self._transaction(connection, write)

    def _commit_repair(
        self,
        connection: sqlite3.Connection,
        session_id: str,
        closers: builtins.list[JsonObject],
    ) -> None:
        rows = encode_rows(closers)
        count = len(closers)

        def write() -> int:
            self._check_schema(connection)
            stored = connection.execute(
                "SELECT next_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if stored is None or stored[0] != self._seen.get(session_id):
                raise StaleWriterError(session_id)
            start: int = stored[0]
            self._starts_at(session_id, closers[0]["seq"], start)
            check_lock(
                connection,
                session_id,
                self._tokens.get(session_id),
                host=self._host,
                stale_ms=self._stale_ms,
            )
            _insert_rows(connection, ((session_id, rows),))
            connection.execute(
                "UPDATE sessions SET revision = revision + 1, next_seq = ? WHERE id = ?",
                (start + count, session_id),
            )
            return start + count

        self._seen[session_id] = self._transaction(connection, write)

    def _delete_stored(self, connection: sqlite3.Connection, session_id: str) -> bool:
        def write() -> bool:
            self._check_schema(connection)
            check_lock(
                connection, session_id, self._tokens.get(session_id), stale_ms=self._stale_ms
            )
            cursor = connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return cursor.rowcount > 0

        self._seen.pop(session_id, None)
        return self._transaction(connection, write)

    # ---- locks ---------------------------------------------------------------------------

    def _acquire_writer(self, connection: sqlite3.Connection, session_id: str) -> None:
        token = new_token()
        self._transaction(
            connection,
            partial(
                check_lock,
                connection,
                session_id,
                token,
                acquire=True,
                host=self._host,
                stale_ms=self._stale_ms,
            ),
        )
        self._tokens[session_id] = token
        if not self._heartbeat:
            self._heartbeat.append(Heartbeat(self._beat, self._heartbeat_s))

    def _release_lock(self, connection: sqlite3.Connection, session_id: str, token: str) -> None:
        """`_release` in a transaction of its own, or in a group's."""
        self._transaction(connection, partial(self._release, connection, session_id, token))

    @staticmethod
    def _release(connection: sqlite3.Connection, session_id: str, token: str) -> None:
        connection.execute(
            "DELETE FROM session_locks WHERE session_id = ? AND token = ?", (session_id, token)
        )

    def _beat(self) -> None:
        """Refresh the heartbeat of every lock this instance holds."""
        with self._mutex:
            connection = self._connection
            tokens = list(self._tokens.items())
            held = [(now_ms(), session_id, token) for session_id, token in tokens]
            if connection is None or not held:
                return
            self._transaction(
                connection,
                partial(
                    connection.executemany,
                    "UPDATE session_locks SET heartbeat_at = ? WHERE session_id = ? AND token = ?",
                    held,
                ),
            )

    def _close(self, connection: sqlite3.Connection, held: dict[str, str]) -> None:
        try:
            for session_id, token in held.items():
                self._release(connection, session_id, token)
        finally:
            connection.close()
            self._connection = self._cursor = None
