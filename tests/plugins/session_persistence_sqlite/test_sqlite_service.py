"""`sessionPersistence` over SQLite: the seam's rules end to end (refusals store nothing,
durability, adoption, repair commits, reads, revisions, group commit and write faults)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlite_helpers import connect, db_path, event, turn

import plugins.session
import plugins.session_persistence_sqlite as sqlite_plugin
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def mounted(root: Path, **config: Any) -> AsyncIterator[Context]:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(sqlite_plugin, {"path": str(db_path(root)), **config})
        yield ctx


def rows(root: Path) -> list[tuple[Any, ...]]:
    with connect(root) as db:
        return db.execute("SELECT session_id, seq FROM events ORDER BY 1, 2").fetchall()


async def test_refusals_store_nothing(tmp_path: Path) -> None:
    async with mounted(tmp_path) as ctx:
        persistence = ctx.sessionPersistence
        with pytest.raises(TypeError, match="createdAt must be a non-negative safe integer"):
            await persistence.create({"id": "a", "createdAt": -1})
        await persistence.create({"id": "a", "createdAt": 1, "cwd": "/w"})
        with pytest.raises(SessionPersistenceError, match='"a" already exists in this backend'):
            await persistence.create({"id": "a", "createdAt": 1})
        with pytest.raises(SessionPersistenceError) as mismatch:
            await persistence.append("a", [event(1, "turn/start", {"turn": 1})])
        assert str(mismatch.value) == 'append seq mismatch for "a": expected 0 at index 0, got 1'
        with pytest.raises(TypeError, match="not losslessly JSON-serializable"):
            await persistence.append("a", [event(0, "turn/start", {"x": float("nan")})])
        await persistence.append("a", [])
        assert await persistence.list() == []
        assert not db_path(tmp_path).exists()  # nothing stored, not even an empty database
        await persistence.append("a", turn(0))
    async with mounted(tmp_path) as ctx:
        with pytest.raises(SessionPersistenceError) as stored:
            await ctx.sessionPersistence.create({"id": "a", "createdAt": 1})
    assert str(stored.value) == (
        'session "a" already has a persisted log on disk; load/resume it instead of creating'
    )
    assert rows(tmp_path) == [("a", 0), ("a", 1), ("a", 2), ("a", 6), ("a", 7)]  # 2: packed


async def test_append_is_durable_and_adopted_by_a_fresh_instance(tmp_path: Path) -> None:
    batch = turn(0)
    async with mounted(tmp_path) as ctx:
        await ctx.sessionPersistence.create({"id": "d", "createdAt": 7, "cwd": "/w"})
        await ctx.sessionPersistence.append("d", batch)
        batch[0]["data"]["turn"] = 99  # the caller's mutation after the call
        with connect(tmp_path) as db:
            assert db.execute("SELECT data FROM events WHERE seq = 0").fetchall() == [
                ('{"turn":1}',)
            ]
    async with mounted(tmp_path) as ctx:
        await ctx.sessionPersistence.append("d", turn(8, 2))  # unknown id here: adopted
        loaded = await ctx.sessionPersistence.load("d")
        assert [e["seq"] for e in loaded.events] == list(range(16))
        assert loaded.header == {
            "version": 0,
            "id": "d",
            "createdAt": 7,
            "cwd": "/w",
            "delegationDepth": 0,
        }


async def test_inspect_repairs_in_memory_and_load_commits(tmp_path: Path) -> None:
    message = {
        "id": "a1",
        "role": "assistant",
        "content": [{"type": "tool-call", "id": "c1", "name": "grep", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    answer = event(10, "assistant/message", {"turn": 2, "step": 1, "message": message})
    answer["sourceEventSeqs"] = []
    answer["surfaceOp"] = "append"
    opened = [event(8, "turn/start", {"turn": 2}), event(9, "step/start", {"turn": 2, "step": 1})]
    async with mounted(tmp_path) as ctx:
        await ctx.sessionPersistence.create({"id": "o", "createdAt": 1})
        await ctx.sessionPersistence.append("o", [*turn(0), *opened, answer])
    async with mounted(tmp_path) as ctx:
        persistence = ctx.sessionPersistence
        before = {s.header["id"]: s.revision for s in await persistence.list_snapshots()}
        inspected = await persistence.inspect("o")
        closers = inspected.events[11:]
        assert [dumps(e) for e in closers] == [
            '{"type":"tool/result","seq":11,"time":110,"data":{"turn":2,"step":1,"message":'
            '{"id":"interrupted-tool-result-c1-11","role":"user","source":{"kind":"tool",'
            '"callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","isError":true,'
            '"content":[{"type":"text","text":"The tool call was interrupted before the Harness '
            'recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":'
            '"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}',
            '{"type":"step/end","seq":12,"time":110,"data":{"turn":2,"step":1}}',
            '{"type":"turn/end","seq":13,"time":110,"data":{"turn":2,"reason":'
            '{"kind":"interrupted"}}}',
        ]
        assert rows(tmp_path)[-1] == ("o", 10)
        assert {s.header["id"]: s.revision for s in await persistence.list_snapshots()} == before
        loaded = await persistence.load("o")
        assert [dumps(e) for e in loaded.events] == [dumps(e) for e in inspected.events]
        assert rows(tmp_path)[-1] == ("o", 13)
        after = {s.header["id"]: s.revision for s in await persistence.list_snapshots()}
        assert after["o"] != before["o"]
        await persistence.append("o", [event(14, "turn/start", {"turn": 3})])
        assert await persistence.read_from("o", 13) == [
            loaded.events[13],
            event(14, "turn/start", {"turn": 3}),
        ]
        assert await persistence.read_from("o", 15) == []
        with pytest.raises(TypeError) as bad:
            await persistence.read_from("o", -1)
        assert str(bad.value) == "readFrom fromSeq must be a non-negative safe integer, got -1"
        with pytest.raises(SessionPersistenceError, match=r'^session "nope" not found$'):
            await persistence.load("nope")
    async with mounted(tmp_path) as ctx:  # the committed closers reload with their key order
        reloaded = await ctx.sessionPersistence.load("o")
        assert [dumps(e) for e in reloaded.events[:14]] == [dumps(e) for e in loaded.events]


async def test_version_and_unknown_type_refusals(tmp_path: Path) -> None:
    async with mounted(tmp_path) as ctx:
        await ctx.sessionPersistence.create({"id": "u", "createdAt": 1})
        kept = {**event(8, "future/thing", {"a": 1}), "ignorable": True}
        await ctx.sessionPersistence.append("u", [*turn(0), kept])
        loaded = await ctx.sessionPersistence.load("u")
        assert dumps(loaded.events[8]) == dumps(kept)
    with connect(tmp_path) as db:
        db.execute("UPDATE events SET ignorable = NULL WHERE seq = 8")
    async with mounted(tmp_path) as ctx:
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            await ctx.sessionPersistence.load("u")
    assert str(caught.value) == (
        'session "u" contains event type "future/thing" (seq 8) unknown to this harness and not '
        "marked ignorable; refusing to interpret the log — it was likely written by a newer "
        f"harness (raw log: {db_path(tmp_path)})"
    )
    for version, text in (
        (1, "uses log format v1, but this harness reads only v0"),
        (-1, "uses log format v-1, older than the supported v0"),
    ):
        with connect(tmp_path) as db:
            db.execute("UPDATE sessions SET version = ?", (version,))
        async with mounted(tmp_path) as ctx:
            with pytest.raises(SessionFormatUnsupportedError, match=text):
                await ctx.sessionPersistence.load("u")


async def test_corruption_is_raised_and_left_untouched(tmp_path: Path) -> None:
    async with mounted(tmp_path) as ctx:
        await ctx.sessionPersistence.create({"id": "c", "createdAt": 1})
        await ctx.sessionPersistence.append("c", [*turn(0), *turn(8, 2)])
    with connect(tmp_path) as db:
        db.execute("UPDATE events SET surface_op = 'nope' WHERE seq = 1")
        before = db.execute("SELECT * FROM events ORDER BY seq").fetchall()
    async with mounted(tmp_path) as ctx:
        with pytest.raises(SessionPersistenceCorruptionError, match=r"physical row at seq 1$"):
            await ctx.sessionPersistence.load("c")
    with connect(tmp_path) as db:
        assert db.execute("SELECT * FROM events ORDER BY seq").fetchall() == before


def revision(root: Path, session_id: str) -> int:
    """The session row's write counter: one per committed transaction."""
    with connect(root) as db:
        (count,) = db.execute(
            "SELECT revision FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
    return int(count)


async def test_concurrent_flushes_share_one_transaction(tmp_path: Path) -> None:
    async with mounted(tmp_path) as ctx:
        session = ctx.sessions.create("g", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        assert await ctx.sessions.flush(session)
        before = revision(tmp_path, "g")
        for k in range(5):
            title = {"title": f"t{k}", "messageSeqs": [], "source": {"kind": "user"}}
            session.append("session/title", title)
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(ctx.sessions.flush, session)
        assert revision(tmp_path, "g") == before + 1
        assert [e["seq"] for e in await ctx.sessionPersistence.read_from("g", 0)] == list(range(6))


async def test_a_busy_database_fails_the_flush_and_keeps_the_events(tmp_path: Path) -> None:
    async with mounted(tmp_path, busy_timeout_ms=50) as ctx:
        session = ctx.sessions.create("f", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        session.append("step/start", {"turn": 1, "step": 1})
        holder = sqlite3.connect(db_path(tmp_path), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # a real writer holding the database
        try:
            with pytest.raises(SessionPersistenceError, match="SQLITE_BUSY: database is locked"):
                await ctx.sessions.flush(session)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        session.append("step/end", {"turn": 1, "step": 1})
        await ctx.sessions.flush(session)
        stored = await ctx.sessionPersistence.read_from("f", 0)
        assert [e["type"] for e in stored] == [
            "session/end-seed",
            "turn/start",
            "step/start",
            "step/end",
        ][-len(stored) :]
        assert [e["seq"] for e in stored] == list(range(len(stored)))
