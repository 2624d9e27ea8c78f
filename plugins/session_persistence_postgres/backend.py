"""The PostgreSQL storage engine (docs/backends.md): one row per session and one row per event.

Every write is one transaction: the session row is locked `FOR UPDATE` (or, for the first batch,
inserted with `ON CONFLICT DO NOTHING`: a conflict is a lost race), the writer lock, owner token
and stale-writer (`next_seq`) checks are verified, the events go in with one
`INSERT ... SELECT FROM unnest(...)`, `next_seq` and `revision` advance, COMMIT
(`synchronous_commit = on`: durable on return). Appends (first batches included), the hot
path, go through the group commit (`group.py`): the appends of every session waiting at once
are one autocommit statement (one round trip, one transaction, one WAL flush), each session
checked on its own; an append whose reply was lost is looked up before it counts as failed
(docs/persistence.md). Repairs and deletes use an explicit transaction.

Writer exclusion: a live session's advisory lock (key: `lock_key(id)`) is held with
`pg_try_advisory_lock` on one dedicated connection outside the pool, so the server frees it when
this process dies; the `dsh_session_owners` row names the holder for `SessionLockedError`. A
write for an id this instance does not hold takes `pg_try_advisory_xact_lock` inside its own
transaction. If the lock connection drops, the next owned write re-acquires the lock (on a new
connection) or raises `SessionLockedError`. A lock whose owner row names a dead process on this
host is waited for (bounded): the server frees it only once it notices the closed connection.
Advisory locks are per database and the key depends
on the session id only (docs/backends.md), so two stores (schemas) in one database contend for the
locks of equal session ids: give each store its own database, or keep their ids distinct.
"""

from __future__ import annotations

import builtins
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, Final, NamedTuple

import anyio
import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from plugins.session_persistence.backend import (
    JsonObject,
    Location,
    Owner,
    SetAside,
    Snapshot,
    StoredLog,
)
from plugins.session_persistence.base import BackendBase
from plugins.session_persistence.errors import (
    SessionExistsError,
    SessionLockedError,
    SessionPersistenceError,
    StaleWriterError,
    WriterLockLostError,
)
from plugins.session_persistence.liveness import holder_gone

from .connection import (
    DatabaseError,
    check_id,
    configure,
    connect,
    connection_kwargs,
    lock_key,
    require_asyncio,
    scrub,
)
from .group import GroupCommit
from .lockwatch import LockWatch, readable
from .rows import EventColumns, GroupArrays, encode_events, header_values, meta_of, scan_rows
from .schema import Statements, ensure_schema

__all__ = ["PostgresBackend"]

Connection = psycopg.AsyncConnection[TupleRow]
#: A write's body: given the connection and the locked session row's `(next_seq, revision)`,
#: it writes and returns the new `next_seq`.
_Body = Callable[[Connection, tuple[int, int]], Awaitable[int]]


_log = logging.getLogger("plugins.session_persistence_postgres")

#: How long a lock whose recorded holder is a dead process on this host is waited for.
DEAD_HOLDER_GRACE_S: Final = 2.0


class _Batch(NamedTuple):
    """One session's append waiting for its group; `header` (the session row's columns) makes
    it the first batch, creating the session."""

    session_id: str
    columns: EventColumns
    header: dict[str, Any] | None


class _Checked(NamedTuple):
    """What a group append sent and checked for one session, and whether it wrote."""

    owned: bool
    lock_pid: int
    seen: int | None
    locked: bool
    token: str | None
    pid: int | None
    host: str | None
    stored: bool
    next_seq: int | None
    written: bool


#: A group append's outcome for one session: what was checked, or that session's own error.
_Outcome = _Checked | BaseException


class _LockLost(Exception):
    """This instance held a session's lock, but its lock connection no longer does."""


class PostgresBackend(BackendBase):
    """Session logs in PostgreSQL schema `schema` (created if absent) reached through `dsn`.

    `dsn` None reads `$DSH_POSTGRES_DSN`; empty lets libpq use its environment (`PGHOST`, ...).
    Construct it on asyncio only (psycopg's async API is asyncio-only); `open()` connects,
    creates or checks the tables and starts the pool (every operation opens it on first use).
    """

    name: str = "session-persistence-postgres"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        schema: str = "dsh",
        pool_max_size: int = 10,
        connect_timeout_s: int = 10,
    ) -> None:
        require_asyncio()
        if not schema or "\x00" in schema:
            raise ValueError(f"the PostgreSQL schema name must be non-empty, got {schema!r}")
        if pool_max_size < 1:
            raise ValueError(f"pool_max_size must be at least 1, got {pool_max_size}")
        self.dsn: Final = os.environ.get("DSH_POSTGRES_DSN", "") if dsn is None else dsn
        self.schema: Final = schema
        self.pool_max_size: Final = pool_max_size
        self._connect_timeout_s = connect_timeout_s
        self._sql = Statements(schema)
        self._token: Final = uuid.uuid4().hex
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._store_id = ""
        self._opening = anyio.Lock()
        self._closed = False
        #: The dedicated connection holding the live advisory locks, its server pid, and a
        #: generation number bumped each time it is replaced.
        self._lock_conn: Connection | None = None
        self._lock_pid = 0
        self._generation = 0
        self._lock_guard = anyio.Lock()
        #: Live ids whose advisory lock this instance took, with the lock connection generation.
        self._held: dict[str, int] = {}
        #: Live ids whose lock went with a dropped connection and could not be re-taken: every
        #: write for them raises this error until the id is released (docs/storage-safety.md).
        self._lost: dict[str, WriterLockLostError] = {}
        self._watch = LockWatch(self._check_lock_connection)
        #: `next_seq` of each id as this instance last read or wrote it (stale-writer check).
        self._seen: dict[str, int] = {}
        #: Ids whose write lost its reply and was not found stored: a retry refused as stale
        #: checks again whether that write was stored after all (with the incarnations of lost
        #: first batches, which a retry of a first batch does not share).
        self._unsure: dict[str, frozenset[str]] = {}
        self._group: GroupCommit[_Batch, _Checked] = GroupCommit(self._write_group)

    # ---- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, create or check the schema, start the pool (idempotent)."""
        await self._ready()

    async def _ready(self) -> AsyncConnectionPool[Connection]:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._closed:
                raise SessionPersistenceError(f"{self.name}: the backend is closed")
            if self._pool is None:
                conn = await self._connect()
                try:
                    try:
                        self._store_id = await ensure_schema(conn, self.schema)
                    except psycopg.Error as error:
                        raise self._error("preparing the schema", error) from None
                    pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
                        self.dsn,
                        min_size=1,
                        max_size=self.pool_max_size,
                        kwargs=connection_kwargs(self.dsn, self._connect_timeout_s),
                        configure=configure,
                        open=False,
                        name=self.name,
                    )
                    await pool.open(wait=True, timeout=self._connect_timeout_s)
                except BaseException:
                    await conn.close()
                    raise
                self._set_lock_connection(conn)
                self._pool = pool
            return self._pool

    async def _connect(self) -> Connection:
        return await connect(self.dsn, connect_timeout_s=self._connect_timeout_s, keepalive=True)

    def _set_lock_connection(self, conn: Connection) -> None:
        self._lock_conn, self._lock_pid = conn, conn.info.backend_pid
        self._generation += 1
        self._watch.follow(conn)

    def _error(self, what: str, error: BaseException) -> DatabaseError:
        return DatabaseError(f"{self.name}: {what} failed: {scrub(str(error), self.dsn)}")

    @asynccontextmanager
    async def _connection(self, what: str) -> AsyncIterator[Connection]:
        """A pooled connection; database failures become `DatabaseError` naming `what`."""
        pool = await self._ready()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.Error as error:
            raise self._error(what, error) from None

    async def store_identity(self) -> str:
        """The `dsh_persistence_state.store_id` of the schema (connecting if needed)."""
        await self._ready()
        return self._store_id

    async def aclose(self) -> None:
        """Release every writer lock (dropping the lock connection) and close the pool."""
        async with self._opening:
            if self._closed:
                return
            self._closed = True
        await self._group.aclose()
        await self._watch.aclose()
        pool, conn = self._pool, self._lock_conn
        self._pool = self._lock_conn = None
        self._held.clear()
        self._lost.clear()
        try:
            if conn is not None and not conn.closed:
                try:
                    if not conn.broken:
                        await conn.execute(self._sql.disown_all, (self._token,))
                finally:
                    await conn.close()
        except psycopg.Error as error:
            raise self._error("releasing the writer locks", error) from None
        finally:
            if pool is not None:
                await pool.close()

    # ---- reads ---------------------------------------------------------------------------

    def locate(self, meta: JsonObject) -> Location | None:
        """None: a database row has no raw log path."""
        return None

    def _revision(self, incarnation: object, revision: object) -> str:
        return f"postgres:{self._store_id}:{incarnation}:{revision}"

    async def load_stored(self, session_id: str) -> StoredLog | None:
        """The session row and its event rows, read in one snapshot; None when not stored."""
        check_id(session_id)
        what = f'reading session "{session_id}"'
        async with self._connection(what) as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor = await conn.execute(self._sql.read_session, (session_id,))
            session = await cursor.fetchone()
            if session is None:
                return None
            cursor = await conn.execute(self._sql.read_events, (session_id,))
            rows = await cursor.fetchall()
        meta = meta_of(session[:-3])
        incarnation, revision, next_seq = session[-3:]
        events: list[JsonObject] = []
        if meta["version"] == 0:
            events = scan_rows(rows, next_seq)
        self._seen[session_id] = next_seq
        return StoredLog(meta, events, self._revision(incarnation, revision))

    async def read_stored_revision(self, session_id: str) -> str | None:
        """`postgres:<store id>:<incarnation>:<revision>`, None when not stored."""
        check_id(session_id)
        async with self._connection(f'reading session "{session_id}"') as conn:
            cursor = await conn.execute(self._sql.read_revision, (session_id,))
            row = await cursor.fetchone()
        return None if row is None else self._revision(*row)

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        """Headers with revisions, by `(createdAt, id)`."""
        async with self._connection("listing sessions") as conn:
            cursor = await conn.execute(self._sql.list_sessions)
            rows = await cursor.fetchall()
        return [Snapshot(meta_of(row[:-2]), self._revision(*row[-2:])) for row in rows]

    # ---- writes --------------------------------------------------------------------------

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        """Make `events` durable as one transaction (creating the session row with them when
        not materialized), shared with the appends of other sessions waiting at once."""
        check_id(meta["id"])
        session_id: str = meta["id"]
        columns = encode_events(session_id, events)
        if not is_materialized:
            header = {**header_values(meta), "incarnation": str(uuid.uuid4())}
            await self._append(_Batch(session_id, columns, header))
        elif events:
            await self._append(_Batch(session_id, columns, None))

    async def _append(self, batch: _Batch) -> None:
        """The hot path: the append joins the group commit (`_write_group`); a refused check
        wrote nothing and is diagnosed from what the statement returned."""
        session_id = batch.session_id
        self._refuse_lost(session_id)
        relocked = False
        while True:
            checked = await self._group.submit(session_id, batch)
            if checked.written:
                self._unsure.pop(session_id, None)
                return
            try:
                self._check_lock(
                    session_id,
                    checked.owned,
                    checked.locked,
                    checked.token,
                    checked.pid,
                    checked.host,
                )
            except _LockLost:
                if relocked:
                    raise self._lose(session_id, checked.pid, checked.host) from None
                relocked = True
                await self._reacquire(session_id, checked.lock_pid)
                continue
            if checked.stored and session_id in self._unsure:
                rest = await self._unwritten(batch)
                if rest is None:
                    return
                if rest is not batch:
                    batch = rest
                    continue
            if batch.header is not None:
                raise SessionExistsError(
                    f'session "{session_id}" already has a persisted log in PostgreSQL '
                    f'schema "{self.schema}" (another writer created it first)'
                )
            if not checked.stored or checked.next_seq != checked.seen:
                raise StaleWriterError(session_id)
            raise SessionPersistenceError(
                f"session {session_id} append starts at seq {batch.columns.seqs[0]}, stored next "
                f"seq is {checked.next_seq}"
            )

    async def _write_group(self, batches: Sequence[_Batch]) -> list[_Outcome]:
        """Group commit: the appends of many sessions (`batches`, at most one per session) in
        one statement, so one transaction and one commit (docs/performance.md).

        Each session keeps its own checks (writer lock, owner token, `next_seq`); a refused one
        writes nothing and the others go on. `next_seq` is recorded only for what the statement
        committed. A statement that fails on a usable connection (a bad row, a constraint) is
        retried session by session, so the failure stays with its session. A connection that
        broke before the reply leaves the outcome unknown: each session is then looked up
        (`_after_lost_reply`), and only those found stored exactly as sent are recorded."""
        lost = {index: self._lost.get(batch.session_id) for index, batch in enumerate(batches)}
        sent = [batch for index, batch in enumerate(batches) if lost[index] is None]
        arrays = GroupArrays()
        for session_id, columns, header in sent:
            arrays.add(
                session_id,
                columns,
                key=lock_key(session_id),
                lock_pid=self._lock_pid,
                token=self._token if session_id in self._held else None,
                seen=self._seen.get(session_id),
                header=header,
            )
        outcomes = iter(await self._write_together(arrays, sent) if sent else [])
        return [next(outcomes) if error is None else error for error in lost.values()]

    async def _write_together(self, arrays: GroupArrays, sent: Sequence[_Batch]) -> list[_Outcome]:
        """Run the group statement for `sent` (`arrays` holds their parameters)."""
        alone = len(sent) == 1
        what = (
            f'writing session "{sent[0].session_id}"' if alone else f"writing {len(sent)} sessions"
        )
        pool = await self._ready()
        lost_reply: psycopg.Error | None = None
        try:
            async with pool.connection() as conn:
                try:
                    cursor = await conn.execute(self._sql.append_group, arrays.params())
                    rows = await cursor.fetchall()
                except psycopg.Error as error:
                    if conn.broken:
                        lost_reply = error
                    elif alone:
                        raise
                    rows = None
        except psycopg.Error as error:
            raise self._error(what, error) from None
        if lost_reply is not None:
            return await self._after_lost_reply(arrays, sent, self._error(what, lost_reply))
        if rows is None:  # the statement failed on a live connection: find whose rows did
            return [await self._write_alone(batch) for batch in sent]
        checked = {row[0]: row[1:] for row in rows}
        outcomes: list[_Outcome] = []
        for position, batch in enumerate(sent):
            outcome = _Checked(
                arrays.owned[position],
                arrays.lock_pids[position],
                arrays.seens[position],
                *checked[batch.session_id],
            )
            if outcome.written:
                self._seen[batch.session_id] = arrays.ends[position]
            outcomes.append(outcome)
        return outcomes

    async def _after_lost_reply(
        self, arrays: GroupArrays, sent: Sequence[_Batch], error: DatabaseError
    ) -> list[_Outcome]:
        """The group statement's connection broke before its reply came: it committed or it
        did not (one transaction). A session whose stored rows are exactly its batch
        (`_stored_upto`) was written; every other one fails with `error` and is remembered in
        `_unsure`, so that a retry refused as stale looks again (docs/persistence.md)."""
        outcomes: list[_Outcome] = []
        for position, batch in enumerate(sent):
            session_id, end = batch.session_id, arrays.ends[position]
            try:
                stored = await self._stored_upto(batch, self._incarnations(batch))
            except DatabaseError:
                stored = None
            if stored != end:
                self._unsure[session_id] = self._incarnations(batch)
                outcomes.append(error)
                continue
            self._seen[session_id] = end
            self._unsure.pop(session_id, None)
            token = arrays.tokens[position]
            outcomes.append(
                _Checked(
                    arrays.owned[position],
                    arrays.lock_pids[position],
                    arrays.seens[position],
                    True,
                    token,
                    None,
                    None,
                    True,
                    end,
                    True,
                )
            )
        return outcomes

    def _incarnations(self, batch: _Batch) -> frozenset[str]:
        """The incarnations a lost write of `batch`'s session may have created its row with."""
        earlier = self._unsure.get(batch.session_id, frozenset())
        return earlier if batch.header is None else earlier | {batch.header["incarnation"]}

    async def _stored_upto(self, batch: _Batch, incarnations: frozenset[str]) -> int | None:
        """The stored `next_seq` when what is stored from `batch`'s first seq on is a non-empty
        prefix of `batch`, row for row, written by this instance: its owner row carries this
        instance's token (when it holds the lock) and a created row one of `incarnations`
        (when `batch` creates it). None for anything else."""
        session_id, columns = batch.session_id, batch.columns
        start = columns.seqs[0] if columns.seqs else 0
        what = f'checking session "{session_id}"'
        async with self._connection(what) as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor = await conn.execute(self._sql.read_written, (session_id,))
            row = await cursor.fetchone()
            if row is None:
                return None
            incarnation, next_seq, token = row
            cursor = await conn.execute(self._sql.read_range, (session_id, start, next_seq))
            rows = await cursor.fetchall()
        if session_id in self._held and token != self._token:
            return None
        if batch.header is not None and incarnation not in incarnations:
            return None
        if next_seq <= start or len(rows) != next_seq - start or not columns.begins(rows):
            return None
        stored: int = next_seq
        return stored

    async def _unwritten(self, batch: _Batch) -> _Batch | None:
        """For a retry refused after a lost reply: None when the earlier write stored all of
        `batch`, the rest of `batch` when it stored a prefix (recorded as seen), else `batch`."""
        session_id = batch.session_id
        stored = await self._stored_upto(batch, self._incarnations(batch))
        if stored is None:
            return batch
        self._seen[session_id] = stored
        self._unsure.pop(session_id, None)
        done = stored - batch.columns.seqs[0]
        if done == len(batch.columns.seqs):
            return None
        return _Batch(session_id, batch.columns.after(done), None)

    async def _write_alone(self, batch: _Batch) -> _Outcome:
        """One session's append as a group of its own; its error is its outcome."""
        try:
            (outcome,) = await self._write_group([batch])
        except DatabaseError as error:
            return error
        return outcome

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        """One transaction inserting `closers` (rows never tear, so there is no tail to cut)."""
        check_id(meta["id"])
        if marker is not None:
            raise TypeError(f"PostgreSQL logs have no torn tail to cut: {marker!r}")
        if not closers:
            return None
        session_id: str = meta["id"]
        columns = encode_events(session_id, closers)

        async def repair(conn: Connection, state: tuple[int, int]) -> int:
            next_seq, _ = state
            if next_seq != self._seen.get(session_id):
                raise StaleWriterError(session_id)
            return await self._insert(conn, session_id, columns, next_seq)

        await self._transaction(session_id, repair)
        return None

    async def delete_stored(self, session_id: str) -> bool:
        """Delete the session row (its events go with it) in one transaction under the lock."""
        if await self.read_stored_revision(session_id) is None:
            return False

        async def delete(conn: Connection, state: tuple[int, int]) -> int:
            await conn.execute(self._sql.delete_session, (session_id,))
            return 0

        await self._transaction(session_id, delete)
        self._seen.pop(session_id, None)
        return True

    async def _insert(
        self, conn: Connection, session_id: str, columns: EventColumns, start: int
    ) -> int:
        """Insert the rows (numbered from `start`: the coordinator checked the batch continues
        the log) and advance the session row; the new `next_seq`."""
        end = start + len(columns.seqs)
        if columns.seqs:
            await conn.execute(self._sql.insert_events, {"id": session_id, **columns.arrays()})
        await conn.execute(self._sql.advance, (end, session_id))
        return end

    def _lock_params(self, session_id: str) -> dict[str, Any]:
        """The lock-check parameters: the transient key, and where the live lock must show in
        `pg_locks` (this instance's lock connection, the key's two 32-bit halves)."""
        key = lock_key(session_id)
        unsigned = key % 2**64
        return {
            "id": session_id,
            "key": key,
            "lock_pid": self._lock_pid,
            "hi": unsigned >> 32,
            "lo": unsigned & 0xFFFFFFFF,
        }

    def _check_lock(
        self, session_id: str, owned: bool, locked: object, token: object, pid: Any, host: Any
    ) -> None:
        """Raise unless the write may go on: `_LockLost` when a held live lock went away with
        its connection, `SessionLockedError` when another writer holds the session."""
        if not locked:
            if owned:
                raise _LockLost
            raise SessionLockedError(session_id, pid, host)
        if owned and token != self._token:
            raise SessionLockedError(session_id, pid, host)

    async def _transaction(self, session_id: str, body: _Body) -> None:
        """Run `body` in one explicit transaction after the lock checks (the session row locked
        `FOR UPDATE`); re-acquire a lost live lock once."""
        self._refuse_lost(session_id)
        for attempt in range(2):
            owned = session_id in self._held
            params = self._lock_params(session_id)
            try:
                what = f'writing session "{session_id}"'
                async with self._connection(what) as conn, conn.transaction():
                    cursor = await conn.execute(self._sql.checks[owned], params)
                    row = await cursor.fetchone()
                    if row is None:
                        raise StaleWriterError(session_id)
                    self._check_lock(session_id, owned, *row[:4])
                    end = await body(conn, (row[4], row[5]))
            except _LockLost:
                if attempt:
                    raise self._lose(session_id, None, None) from None
                await self._reacquire(session_id, params["lock_pid"])
                continue
            self._seen[session_id] = end
            return

    def _refuse_lost(self, session_id: str) -> None:
        error = self._lost.get(session_id)
        if error is not None:
            raise error

    def _lose(self, session_id: str, pid: int | None, host: str | None) -> WriterLockLostError:
        """Record that this instance lost `session_id`'s lock for good; the error to raise."""
        self._held.pop(session_id, None)
        error = self._lost[session_id] = WriterLockLostError(session_id, pid, host)
        return error

    # ---- writer lock ---------------------------------------------------------------------

    async def acquire_writer(self, session_id: str) -> None:
        """Take the session's advisory lock on the lock connection (re-entrant per instance);
        `SessionLockedError` naming the owner when another connection holds it."""
        check_id(session_id)
        if session_id in self._held:
            return
        async with self._lock_guard:
            if session_id in self._held:  # taken while this call waited for the guard
                return
            if session_id in self._lost:
                raise self._lost[session_id]
            conn = await self._lock_connection()
            try:
                await self._lock(session_id, conn)
            except DatabaseError:
                if not conn.broken:
                    raise
                await self._lock(session_id, await self._lock_connection())

    async def _lock(self, session_id: str, conn: Connection) -> None:
        """Take the lock on `conn` and record this process as the owner. A holder recorded as a
        dead process on this host is waited for (up to `DEAD_HOLDER_GRACE_S`): the server frees
        its locks only once it notices the closed connection."""
        key = lock_key(session_id)
        host = socket.gethostname()
        params = {
            "key": key,
            "id": session_id,
            "token": self._token,
            "pid": os.getpid(),
            "host": host,
        }
        deadline = anyio.current_time() + DEAD_HOLDER_GRACE_S
        while True:
            try:
                cursor = await conn.execute(self._sql.acquire, params)
                row = await cursor.fetchone()
            except psycopg.Error as error:
                if not conn.broken:
                    with suppress(psycopg.Error):
                        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                raise self._error(f'locking session "{session_id}"', error) from None
            assert row is not None
            granted, holder_pid, holder_host = row
            if granted:
                self._held[session_id] = self._generation
                return
            if not holder_gone(holder_pid, holder_host) or anyio.current_time() > deadline:
                raise SessionLockedError(session_id, holder_pid, holder_host)
            await anyio.sleep(0.01)

    async def _lock_connection(self, *, replace: bool = False) -> Connection:
        """The lock connection, reconnected when it is closed, broken or `replace`d."""
        await self._ready()
        conn = self._lock_conn
        if conn is None or conn.closed or conn.broken or replace:
            if conn is not None:
                await conn.close()
            conn = await self._connect()
            self._set_lock_connection(conn)
        return conn

    async def _check_lock_connection(self, conn: Connection) -> None:
        """The lock connection's socket spoke unasked (see `LockWatch`): probe it; if it is dead,
        re-take its locks on a new connection at once, and mark those another writer took (or
        that cannot be re-taken) as lost, so their next write raises instead of writing."""
        async with self._lock_guard:
            if conn is not self._lock_conn or conn.closed:
                return
            if not conn.broken:
                if not readable(conn.fileno()):
                    return  # a command's answer, already read
                try:
                    await conn.execute("SELECT 1")
                    return
                except psycopg.Error:
                    pass
            generation = self._generation
            ids = [key for key, held in self._held.items() if held == generation]
            await conn.close()
            self._lock_conn = None
            kept: list[str] = []
            try:
                fresh = await self._lock_connection()
            except DatabaseError:
                fresh = None
            for session_id in ids:
                try:
                    if fresh is None:
                        raise SessionLockedError(session_id, None, None)
                    await self._lock(session_id, fresh)
                    kept.append(session_id)
                except (SessionLockedError, DatabaseError) as error:
                    pid = getattr(error, "pid", None)
                    self._lose(session_id, pid, getattr(error, "host", None))
            lost = [session_id for session_id in ids if session_id not in kept]
            _log.warning(
                "%s: the writer-lock connection dropped; re-took %d lock(s)%s",
                self.name,
                len(kept),
                "".join(f'; lost session "{session_id}"' for session_id in lost),
            )

    async def _reacquire(self, session_id: str, checked_pid: int) -> None:
        """A held lock was lost with its connection: lock again on a live one, or raise
        `SessionLockedError`. The lock connection is replaced only if it is the one the failed
        check looked at and the lock was taken on it (so it is dead)."""
        async with self._lock_guard:
            generation = self._held.pop(session_id, None)
            dead = generation == self._generation and checked_pid == self._lock_pid
            conn = await self._lock_connection(replace=dead)
            try:
                await self._lock(session_id, conn)
            except SessionLockedError as error:
                raise self._lose(session_id, error.pid, error.host) from None
            except BaseException:
                self._held[session_id] = -1
                raise

    async def owner(self, session_id: str) -> Owner | None:
        """The recorded owner of `session_id` while some connection holds its advisory lock,
        unless this instance holds it."""
        if session_id in self._held:
            return None
        params = {"id": session_id, **self._lock_params(session_id)}
        async with self._connection(f'reading the owner of session "{session_id}"') as conn:
            cursor = await conn.execute(self._sql.owner, params)
            row = await cursor.fetchone()
        return None if row is None else Owner(row[0], row[1])

    async def lock_record(self, session_id: str) -> Owner | None:
        """The owner row (a crashed writer's row stays: the server freed only its lock)."""
        async with self._connection(f'reading the owner of session "{session_id}"') as conn:
            cursor = await conn.execute(self._sql.owner_record, (session_id,))
            row = await cursor.fetchone()
        return None if row is None else Owner(row[0], row[1])

    async def release_writer(self, session_id: str) -> None:
        """Unlock and forget the owner row (no-op when not held; a lock whose connection
        dropped is already free)."""
        self._lost.pop(session_id, None)
        generation = self._held.pop(session_id, None)
        if generation is None:
            return
        async with self._lock_guard:
            conn = self._lock_conn
            if conn is None or conn.closed or conn.broken or generation != self._generation:
                return
            params = {"id": session_id, "token": self._token, "key": lock_key(session_id)}
            try:
                await conn.execute(self._sql.release, params)
            except psycopg.Error as error:
                if not conn.broken:
                    raise self._error(f'unlocking session "{session_id}"', error) from None
