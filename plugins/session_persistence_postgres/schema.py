"""The tables (docs/backends.md), their creation and version check, and every statement the backend
runs, composed once per schema name."""

from __future__ import annotations

import uuid
from typing import Final, LiteralString

import psycopg
from psycopg import sql

from plugins.session_persistence.errors import SessionPersistenceError

from .connection import lock_key
from .rows import EVENT_COLUMNS, HEADER_COLUMNS

__all__ = ["SCHEMA_VERSION", "Statements", "ensure_schema"]

#: The table layout this build reads and writes.
SCHEMA_VERSION: Final = 1

_HEADER_NAMES: Final = ", ".join(column for _, column, _ in HEADER_COLUMNS)
_HEADER: Final = "version, id, " + _HEADER_NAMES
_EVENT: Final = ", ".join(EVENT_COLUMNS)
#: The header columns after `version, id` as array parameters named after their columns.
_HEADER_ARRAYS: Final = ", ".join(
    f"%({column})s::{'bigint' if kind is int else 'text'}[]" for _, column, kind in HEADER_COLUMNS
)

_STATE_DDL: Final = """CREATE TABLE {s}.dsh_persistence_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    store_id text NOT NULL,
    schema_version integer NOT NULL
)"""
_DDL: Final[tuple[LiteralString, ...]] = (
    """CREATE TABLE {s}.dsh_sessions (
        id text PRIMARY KEY,
        version integer NOT NULL,
        created_at bigint,
        cwd text,
        parent_session text,
        seed_length bigint,
        origin text,
        delegation_depth bigint,
        agent_preset text,
        incarnation uuid NOT NULL,
        revision bigint NOT NULL,
        next_seq bigint NOT NULL
    )""",
    """CREATE TABLE {s}.dsh_events (
        session_id text NOT NULL REFERENCES {s}.dsh_sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        type text,
        time bigint,
        data text,
        source_event_seqs bigint[],
        surface_op text,
        ignorable boolean,
        key_order text,
        PRIMARY KEY (session_id, seq)
    )""",
    """CREATE TABLE {s}.dsh_session_owners (
        session_id text PRIMARY KEY,
        token text NOT NULL,
        pid integer,
        host text,
        acquired_at timestamptz NOT NULL DEFAULT now()
    )""",
)


_INSERT_EVENTS: Final = (
    "INSERT INTO {s}.dsh_events (session_id, "
    + _EVENT
    + """) SELECT %(id)s, seq, type, time, data, ses::bigint[], surface_op, ignorable, key_order
    FROM unnest(%(seqs)s::bigint[], %(types)s::text[], %(times)s::bigint[], %(data)s::text[],
        %(ses)s::text[], %(surface_ops)s::text[], %(ignorable)s::boolean[],
        %(key_orders)s::text[])
        AS r(seq, type, time, data, ses, surface_op, ignorable, key_order)"""
)
_OWNED: Final = """EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
    AND pid = %(lock_pid)s AND classid = %(hi)s::bigint::oid AND objid = %(lo)s::bigint::oid
    AND objsubid = 1 AND granted)"""
_TRANSIENT: Final = "pg_try_advisory_xact_lock(%(key)s)"


def _check(lock: LiteralString) -> LiteralString:
    return (
        "SELECT " + lock + ", o.token, o.pid, o.host, s.next_seq, s.revision "
        "FROM {s}.dsh_sessions AS s "
        "LEFT JOIN {s}.dsh_session_owners AS o ON o.session_id = s.id "
        "WHERE s.id = %(id)s FOR UPDATE OF s"
    )


#: The appends of a group of sessions as one autocommit statement (so one transaction, one
#: commit): lock the stored session rows `FOR UPDATE` (in id order), read this instance's
#: advisory locks from `pg_locks` once, check each session, create the rows of the first
#: batches (`ON CONFLICT DO NOTHING`: a conflict is a lost race), insert the event rows of every
#: session that passed and advance the stored ones; one row per session with what was checked
#: and whether it was written.
_APPEND_GROUP: Final = (
    """WITH g AS (SELECT * FROM unnest(%(ids)s::text[], %(first)s::boolean[], %(owned)s::boolean[],
            %(keys)s::bigint[], %(lock_pids)s::integer[], %(his)s::bigint[], %(los)s::bigint[],
            %(tokens)s::text[], %(seens)s::bigint[], %(starts)s::bigint[], %(ends)s::bigint[],
            %(version)s::integer[], """
    + _HEADER_ARRAYS
    + """, %(incarnation)s::uuid[])
            AS g(id, first, owned, key, lock_pid, hi, lo, mine, seen, start, stop, version, """
    + _HEADER_NAMES
    + """, incarnation)),
        s AS MATERIALIZED (SELECT id, next_seq, revision FROM {s}.dsh_sessions
            WHERE id = ANY (%(ids)s::text[]) ORDER BY id FOR UPDATE),
        held AS MATERIALIZED (SELECT pid, classid::bigint AS hi, objid::bigint AS lo
            FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
            AND pid = ANY (%(lock_pids)s::integer[])),
        c AS MATERIALIZED (SELECT g.*, CASE WHEN g.owned THEN EXISTS (SELECT 1 FROM held AS h
                WHERE h.pid = g.lock_pid AND h.hi = g.hi AND h.lo = g.lo)
                ELSE pg_try_advisory_xact_lock(g.key) END AS locked,
            o.token, o.pid AS owner_pid, o.host, s.id IS NOT NULL AS stored, s.next_seq,
            s.revision
            FROM g LEFT JOIN s ON s.id = g.id
            LEFT JOIN {s}.dsh_session_owners AS o ON o.session_id = g.id),
        go AS MATERIALIZED (SELECT * FROM c WHERE locked AND (mine IS NULL OR token = mine)
            AND CASE WHEN first THEN NOT stored
                ELSE next_seq = seen AND next_seq = start END),
        made AS (INSERT INTO {s}.dsh_sessions ("""
    + _HEADER
    + """, incarnation, revision, next_seq)
            SELECT """
    + _HEADER
    + """, incarnation, 1, stop FROM go WHERE first
            ON CONFLICT (id) DO NOTHING RETURNING id),
        ins AS (INSERT INTO {s}.dsh_events (session_id, """
    + _EVENT
    + """) SELECT r.id, r.seq, r.type, r.time, r.data, r.ses::bigint[], r.surface_op,
                r.ignorable, r.key_order
            FROM unnest(%(event_ids)s::text[], %(seqs)s::bigint[], %(types)s::text[],
                %(times)s::bigint[], %(data)s::text[], %(ses)s::text[], %(surface_ops)s::text[],
                %(ignorable)s::boolean[], %(key_orders)s::text[])
                AS r(id, seq, type, time, data, ses, surface_op, ignorable, key_order)
            WHERE r.id IN (SELECT id FROM go WHERE NOT first UNION ALL SELECT id FROM made)),
        upd AS (UPDATE {s}.dsh_sessions AS t SET next_seq = go.stop, revision = t.revision + 1
            FROM go WHERE t.id = go.id AND NOT go.first RETURNING t.id)
    SELECT c.id, c.locked, c.token, c.owner_pid, c.host, c.stored, c.next_seq,
        c.id IN (SELECT id FROM upd UNION ALL SELECT id FROM made) FROM c"""
)


def _compose(template: LiteralString, schema: str) -> bytes:
    return sql.SQL(template).format(s=sql.Identifier(schema)).as_bytes(None)


class Statements:
    """The backend's SQL for one schema, as ready-to-send bytes."""

    def __init__(self, schema: str) -> None:
        def q(template: LiteralString) -> bytes:
            return _compose(template, schema)

        #: The checks before a repair or a delete, by `owned`: whether the session's advisory
        #: lock is held (owned: by this process's lock connection; else taken for this
        #: transaction), the owner row, and the session row's `next_seq, revision`, locked FOR
        #: UPDATE. Parameters: id, key, lock_pid, hi, lo.
        self.checks = {owned: q(_check(_OWNED if owned else _TRANSIENT)) for owned in (True, False)}
        #: The hot path: the appends of many sessions in one statement (`_APPEND_GROUP`), the
        #: parameters of `GroupArrays.params()`.
        self.append_group = q(_APPEND_GROUP)
        #: Insert a batch's rows from its array literals (`EventColumns.arrays()` and `id`).
        self.insert_events = q(_INSERT_EVENTS)
        self.advance = q(
            """UPDATE {s}.dsh_sessions SET next_seq = %s, revision = revision + 1
            WHERE id = %s"""
        )
        self.owner_record = q("SELECT pid, host FROM {s}.dsh_session_owners WHERE session_id = %s")
        self.delete_session = q("DELETE FROM {s}.dsh_sessions WHERE id = %s")
        self.truncate = q("DELETE FROM {s}.dsh_events WHERE session_id = %s AND seq >= %s")
        self.read_session = q(
            "SELECT " + _HEADER + ", incarnation, revision, next_seq "
            "FROM {s}.dsh_sessions WHERE id = %s"
        )
        self.read_events = q(
            "SELECT " + _EVENT + " FROM {s}.dsh_events WHERE session_id = %s ORDER BY seq"
        )
        #: What a write whose reply was lost may have stored: the session row's incarnation
        #: and `next_seq` with the owner row's token; then its rows in a seq range.
        self.read_written = q(
            """SELECT s.incarnation::text, s.next_seq, o.token FROM {s}.dsh_sessions AS s
            LEFT JOIN {s}.dsh_session_owners AS o ON o.session_id = s.id WHERE s.id = %s"""
        )
        self.read_range = q(
            "SELECT " + _EVENT + " FROM {s}.dsh_events "
            "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
        )
        self.read_revision = q("SELECT incarnation, revision FROM {s}.dsh_sessions WHERE id = %s")
        self.list_sessions = q(
            "SELECT " + _HEADER + ", incarnation, revision FROM {s}.dsh_sessions "
            "ORDER BY created_at, id"
        )
        #: Take a session's advisory lock on the lock connection and, when granted, record this
        #: process as its owner; either way return the grant and the owner row as it was.
        self.acquire = q(
            """WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock(%(key)s) AS ok),
            up AS (
                INSERT INTO {s}.dsh_session_owners (session_id, token, pid, host, acquired_at)
                SELECT %(id)s, %(token)s, %(pid)s, %(host)s, now() FROM l WHERE l.ok
                ON CONFLICT (session_id) DO UPDATE SET token = EXCLUDED.token,
                    pid = EXCLUDED.pid, host = EXCLUDED.host, acquired_at = EXCLUDED.acquired_at
                RETURNING 1
            )
            SELECT l.ok, o.pid, o.host FROM l
            LEFT JOIN {s}.dsh_session_owners AS o ON o.session_id = %(id)s"""
        )
        self.release = q(
            """WITH d AS (DELETE FROM {s}.dsh_session_owners
                WHERE session_id = %(id)s AND token = %(token)s)
            SELECT pg_advisory_unlock(%(key)s)"""
        )
        self.disown_all = q("DELETE FROM {s}.dsh_session_owners WHERE token = %s")
        #: The owner row of a session whose advisory lock some connection holds (NULLs when
        #: the row is missing); no row when the lock is free. Parameters: id, hi, lo.
        self.owner = q(
            """SELECT o.pid, o.host FROM (VALUES (1)) AS v
            LEFT JOIN {s}.dsh_session_owners AS o ON o.session_id = %(id)s
            WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND classid = %(hi)s::bigint::oid AND objid = %(lo)s::bigint::oid
                AND objsubid = 1 AND granted)"""
        )


async def _read_state(
    conn: psycopg.AsyncConnection[tuple[object, ...]], schema: str
) -> tuple[object, ...] | None:
    """`(store_id, schema_version)`, or None when the schema has no state table yet."""
    cursor = await conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables "
        "WHERE schemaname = %s AND tablename = 'dsh_persistence_state')",
        (schema,),
    )
    exists = await cursor.fetchone()
    if exists is None or not exists[0]:
        return None
    cursor = await conn.execute(
        _compose("SELECT store_id, schema_version FROM {s}.dsh_persistence_state", schema)
    )
    return await cursor.fetchone()


async def ensure_schema(conn: psycopg.AsyncConnection[tuple[object, ...]], schema: str) -> str:
    """Check the stored layout version and return the store id; first create the schema and
    every table if the state table is absent (one transaction, serialized by an advisory
    lock, so concurrent first opens create them once)."""
    state = await _read_state(conn, schema)
    if state is None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(f"schema:{schema}"),))
            state = await _read_state(conn, schema)
            if state is None:
                await conn.execute(_compose("CREATE SCHEMA IF NOT EXISTS {s}", schema))
                await conn.execute(_compose(_STATE_DDL, schema))
                for statement in _DDL:
                    await conn.execute(_compose(statement, schema))
                await conn.execute(
                    _compose(
                        """INSERT INTO {s}.dsh_persistence_state (store_id, schema_version)
                        VALUES (%s, %s)""",
                        schema,
                    ),
                    (str(uuid.uuid4()), SCHEMA_VERSION),
                )
                state = await _read_state(conn, schema)
    assert state is not None
    store_id, version = state
    if version != SCHEMA_VERSION:
        raise SessionPersistenceError(
            f'session database schema "{schema}" has schema version {version}, '
            f"incompatible with this build ({SCHEMA_VERSION})"
        )
    return str(store_id)
