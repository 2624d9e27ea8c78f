"""Event rows go in without `sqlite3`'s adapter lookup, stored as `encode_rows` makes them."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import backend, chunk, connect, event, meta, turn, write

from plugins.session.jsonutil import dumps
from plugins.session_persistence_sqlite.rows import encode_rows

pytestmark = pytest.mark.anyio

_COLUMNS = "seq, type, time, data, source_event_seqs, surface_op, ignorable, key_order"


def every_column_kind(start: int) -> list[dict[str, Any]]:
    """Events from `start` whose rows hold every kind of value each column takes."""
    message = {"id": "m", "role": "user", "content": [], "source": {"kind": "user"}}
    live = event(start, "user/message", message)
    live["sourceEventSeqs"] = []  # an empty blob, not NULL
    live["surfaceOp"] = "append"
    closer = event(start + 1, "tool/result", {"turn": 1})
    closer["surfaceOp"] = {"op": "replace", "start": 0, "end": 0}
    closer["sourceEventSeqs"] = [start, 0]  # key_order 1
    ignorable = {"type": "x/new", "seq": start + 2, "time": 5, "data": {}, "ignorable": True}
    large = event(start + 3, "session/title", {"title": "abc " * 2000})  # zstd blob
    deltas = [chunk(seq, "w") for seq in range(start + 4, start + 8)]  # packed: ignorable 0
    return [live, closer, ignorable, large, *deltas]


async def test_a_live_append_binds_no_none_or_bytes_and_stores_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = backend(tmp_path)
    m = meta()
    await write(b, m, [turn(0)])
    await b.acquire_writer("s1")
    batch = every_column_kind(8)
    adapted: list[object] = []

    def adapt(value: object) -> object:
        adapted.append(value)
        return value

    kinds: tuple[type[Any], ...] = (type(None), bytes)
    for kind in kinds:
        key: tuple[type[Any], type[Any]] = (kind, sqlite3.PrepareProtocol)
        monkeypatch.setitem(sqlite3.adapters, key, adapt)
    await b.append_batch(m, batch, is_materialized=True)
    monkeypatch.undo()
    assert adapted == []
    with connect(tmp_path) as db:
        stored = db.execute(f"SELECT {_COLUMNS} FROM events WHERE seq >= 8 ORDER BY seq").fetchall()
        types = db.execute(
            "SELECT typeof(data), typeof(source_event_seqs), typeof(surface_op),"
            " typeof(ignorable), typeof(key_order) FROM events WHERE seq >= 8 ORDER BY seq"
        ).fetchall()
    expected = encode_rows(batch)
    assert stored == expected
    names = {type(None): "null", bytes: "blob", str: "text", int: "integer"}
    assert types == [tuple(names[type(value)] for value in row[3:]) for row in expected]
    assert {kind for row in types for kind in row} == {"null", "blob", "text", "integer"}
    await b.aclose()
    reader = backend(tmp_path)
    loaded = await reader.load_stored("s1")
    assert loaded is not None
    assert [dumps(e) for e in loaded.events] == [dumps(e) for e in turn(0) + batch]
    await reader.aclose()
