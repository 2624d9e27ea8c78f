"""Builders shared by the PostgreSQL backend tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import psycopg
from postgres_support import PostgresTarget
from psycopg import sql

from plugins.session_persistence_postgres import PostgresBackend

JsonObject = dict[str, Any]


def backend(target: PostgresTarget, **kwargs: Any) -> PostgresBackend:
    """A new backend instance over the test's schema."""
    return PostgresBackend(target.dsn, schema=target.schema, **kwargs)


def meta(session_id: str = "s1", cwd: str | None = "/home/u/proj", **extra: Any) -> JsonObject:
    """A session header in meta form."""
    out: JsonObject = {"version": 0, "id": session_id, "createdAt": 1000}
    if cwd is not None:
        out["cwd"] = cwd
    out.update(extra)
    return out


def event(seq: int, kind: str, data: Any) -> JsonObject:
    """A plain event at time `100 + seq`."""
    return {"type": kind, "seq": seq, "time": 100 + seq, "data": data}


def turn(start: int, turn_no: int = 1) -> list[JsonObject]:
    """A complete turn from seq `start` (5 events)."""
    return [
        event(start, "turn/start", {"turn": turn_no}),
        event(start + 1, "step/start", {"turn": turn_no, "step": 1}),
        event(
            start + 2,
            "assistant/chunk",
            {"turn": turn_no, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
        ),
        event(start + 3, "step/end", {"turn": turn_no, "step": 1}),
        event(start + 4, "turn/end", {"turn": turn_no, "reason": {"kind": "completed"}}),
    ]


def execute(target: PostgresTarget, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement against the test's schema (tables unqualified); its rows."""
    with psycopg.connect(target.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(target.schema)))
        cursor = conn.execute(statement.encode(), params or None)
        return cursor.fetchall() if cursor.description else []


def inject_write_faults(target: PostgresTarget, count: int) -> None:
    """Make the next `count` statements inserting event rows fail in the server (a real
    failed transaction: nothing of it is written). A sequence counts the attempts, since a
    failed transaction rolls back anything else it changed."""
    execute(
        target,
        """
        DROP SEQUENCE IF EXISTS dsh_test_fault_calls;
        CREATE SEQUENCE dsh_test_fault_calls;
        CREATE OR REPLACE FUNCTION dsh_test_fault() RETURNS trigger LANGUAGE plpgsql
            SET search_path FROM CURRENT AS $$
        BEGIN
            IF nextval('dsh_test_fault_calls') <= %s THEN
                RAISE EXCEPTION 'injected write fault';
            END IF;
            RETURN NULL;
        END $$;
        CREATE OR REPLACE TRIGGER dsh_test_fault BEFORE INSERT ON dsh_events
            FOR EACH STATEMENT EXECUTE FUNCTION dsh_test_fault();
        """.replace("%s", str(int(count))),
    )


def plant_row_past_next_seq(target: PostgresTarget, session_id: str) -> None:
    """A half-written row past the session's `next_seq` (no transaction leaves one: it is
    corruption)."""
    execute(
        target,
        "INSERT INTO dsh_events (session_id, seq, type, time, data, key_order) "
        "SELECT id, next_seq, 'turn/end', 0, '{\"turn\":', 'tsmd' FROM dsh_sessions "
        "WHERE id = %s",
        session_id,
    )


def plant_version(target: PostgresTarget, session_id: str, version: int) -> None:
    """Mark a stored session as written in log format `version`."""
    execute(target, "UPDATE dsh_sessions SET version = %s WHERE id = %s", version, session_id)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded, about 5 s) until `condition()` holds."""
    for _ in range(500):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")
