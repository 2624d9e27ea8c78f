"""Event builders and database helpers shared by the SQLite backend tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plugins.session_persistence.testing import FIXTURE_NAMES, FIXTURES  # noqa: F401
from plugins.session_persistence_sqlite import SqliteBackend
from plugins.session_persistence_sqlite.database import open_database

JsonObject = dict[str, Any]


def meta(session_id: str = "s1", cwd: str | None = "/home/u/proj", **extra: Any) -> JsonObject:
    """A session header in meta form."""
    out: JsonObject = {"version": 0, "id": session_id, "createdAt": 1000}
    if cwd is not None:
        out["cwd"] = cwd
    out.update(extra)
    return out


def event(seq: int, kind: str, data: JsonObject) -> JsonObject:
    """A plain event at time `100 + seq`."""
    return {"type": kind, "seq": seq, "time": 100 + seq, "data": data}


def chunk(seq: int, text: str, *, kind: str = "text-delta") -> JsonObject:
    """A streaming text (or reasoning) delta of turn 1, step 1, block 0."""
    return event(
        seq,
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": kind, "index": 0, "text": text}},
    )


def turn(start: int, turn_no: int = 1, deltas: int = 4) -> list[JsonObject]:
    """A complete turn from seq `start`: turn/start, step/start, deltas, step/end, turn/end."""
    out = [event(start, "turn/start", {"turn": turn_no})]
    out.append(event(start + 1, "step/start", {"turn": turn_no, "step": 1}))
    for k in range(deltas):
        delta = chunk(start + 2 + k, f"w{k} ")
        delta["data"]["turn"] = turn_no
        out.append(delta)
    seq = start + 2 + deltas
    out.append(event(seq, "step/end", {"turn": turn_no, "step": 1}))
    out.append(event(seq + 1, "turn/end", {"turn": turn_no, "reason": {"kind": "completed"}}))
    return out


def open_turn(start: int, turn_no: int = 1, deltas: int = 4) -> list[JsonObject]:
    """A turn cut off inside its step (no step/end, no turn/end)."""
    return turn(start, turn_no, deltas)[:-2]


def db_path(root: Path) -> Path:
    """The database file under an owner-only directory of `root`."""
    directory = root / "db"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory / "sessions.sqlite3"


def create_database(root: Path) -> None:
    """Create the (empty) test database, as the first write would."""
    open_database(db_path(root), journal_mode="wal", busy_timeout_ms=5000)[0].close()


def backend(root: Path, **kwargs: Any) -> SqliteBackend:
    """A backend over `db_path(root)`."""
    return SqliteBackend(db_path(root), **kwargs)


@contextmanager
def connect(root: Path) -> Iterator[sqlite3.Connection]:
    """A plain autocommit connection to the test database (for inspection and tampering)."""
    connection = sqlite3.connect(db_path(root), isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys = ON")
        yield connection
    finally:
        connection.close()


async def write(b: SqliteBackend, m: JsonObject, batches: list[list[JsonObject]]) -> None:
    """Create `m`'s log with the first batch, append the others."""
    for i, batch in enumerate(batches):
        await b.append_batch(m, batch, is_materialized=i > 0)
