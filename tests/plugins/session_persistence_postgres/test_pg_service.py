"""`sessionPersistence` over PostgreSQL: the seam's rules with nothing stored on refusal,
durability, adoption, repair commits, reads and revisions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pg_helpers import event, execute, turn
from postgres_support import PostgresTarget

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence import SessionPersistenceError

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@asynccontextmanager
async def service(target: PostgresTarget) -> AsyncIterator[Any]:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, target.config())
        yield ctx.sessionPersistence


def rows(target: PostgresTarget) -> list[tuple[Any, ...]]:
    return execute(target, "SELECT session_id, seq FROM dsh_events ORDER BY 1, 2")


async def test_refusals_store_nothing(postgres: PostgresTarget) -> None:
    async with service(postgres) as persistence:
        with pytest.raises(TypeError, match="createdAt must be a non-negative safe integer"):
            await persistence.create({"id": "a", "createdAt": -1})
        await persistence.create({"id": "a", "createdAt": 1, "cwd": "/w"})
        with pytest.raises(SessionPersistenceError, match='"a" already exists in this backend'):
            await persistence.create({"id": "a", "createdAt": 1})
        with pytest.raises(SessionPersistenceError) as mismatch:
            await persistence.append("a", [event(1, "turn/start", {"turn": 1})])
        assert str(mismatch.value) == 'append seq mismatch for "a": expected 0 at index 0, got 1'
        with pytest.raises(SessionPersistenceError, match="expected 1 at index 1, got 2"):
            await persistence.append("a", [event(0, "turn/start", {}), event(2, "x", {})])
        with pytest.raises(TypeError, match="not losslessly JSON-serializable"):
            await persistence.append("a", [event(0, "turn/start", {"x": float("nan")})])
        await persistence.append("a", [])
        assert await persistence.list() == []
        assert rows(postgres) == []
        await persistence.append("a", turn(0))
    async with service(postgres) as persistence:
        with pytest.raises(SessionPersistenceError) as stored:
            await persistence.create({"id": "a", "createdAt": 1})
    assert str(stored.value) == (
        'session "a" already has a persisted log on disk; load/resume it instead of creating'
    )
    assert len(rows(postgres)) == 5


async def test_append_is_durable_and_adopted_by_a_fresh_instance(postgres: PostgresTarget) -> None:
    batch = turn(0)
    async with service(postgres) as persistence:
        await persistence.create({"id": "d", "createdAt": 7, "cwd": "/w"})
        await persistence.append("d", batch)
        batch[0]["data"]["turn"] = 99  # the caller's mutation after the call
        assert execute(postgres, "SELECT data FROM dsh_events WHERE seq = 0") == [('{"turn":1}',)]
    async with service(postgres) as persistence:
        await persistence.append("d", turn(5, 2))  # unknown id here: adopted
        loaded = await persistence.load("d")
        assert [e["seq"] for e in loaded.events] == list(range(10))
        assert loaded.header == {
            "version": 0,
            "id": "d",
            "createdAt": 7,
            "cwd": "/w",
            "delegationDepth": 0,
        }


async def test_inspect_repairs_in_memory_and_load_commits(postgres: PostgresTarget) -> None:
    opened = [event(5, "turn/start", {"turn": 2}), event(6, "step/start", {"turn": 2, "step": 1})]
    async with service(postgres) as persistence:
        await persistence.create({"id": "o", "createdAt": 1})
        await persistence.append("o", [*turn(0), *opened])
    async with service(postgres) as persistence:
        before = {s.header["id"]: s.revision for s in await persistence.list_snapshots()}
        inspected = await persistence.inspect("o")
        assert [e["type"] for e in inspected.events[7:]] == ["step/end", "turn/end"]
        assert len(rows(postgres)) == 7
        assert {s.header["id"]: s.revision for s in await persistence.list_snapshots()} == before
        loaded = await persistence.load("o")
        assert [dumps(e) for e in loaded.events] == [dumps(e) for e in inspected.events]
        assert len(rows(postgres)) == 9
        after = {s.header["id"]: s.revision for s in await persistence.list_snapshots()}
        assert after["o"] != before["o"]
        await persistence.append("o", [event(9, "turn/start", {"turn": 3})])
        assert await persistence.read_from("o", 8) == [
            loaded.events[8],
            event(9, "turn/start", {"turn": 3}),
        ]
        assert await persistence.read_from("o", 10) == []
        with pytest.raises(TypeError) as bad:
            await persistence.read_from("o", -1)
        assert str(bad.value) == "readFrom fromSeq must be a non-negative safe integer, got -1"
        with pytest.raises(SessionPersistenceError, match='session "nope" not found'):
            await persistence.load("nope")


async def test_unknown_types_are_refused_unless_ignorable(postgres: PostgresTarget) -> None:
    async with service(postgres) as persistence:
        await persistence.create({"id": "u", "createdAt": 1})
        kept = {**event(5, "future/thing", {"a": 1}), "ignorable": True}
        await persistence.append("u", [*turn(0), kept])
        loaded = await persistence.load("u")
        assert dumps(loaded.events[5]) == dumps(kept)
    execute(postgres, "UPDATE dsh_events SET ignorable = NULL, key_order = 'tsmd' WHERE seq = 5")
    async with service(postgres) as persistence:
        with pytest.raises(SessionPersistenceError) as caught:
            await persistence.load("u")
    assert str(caught.value) == (
        'session "u" contains event type "future/thing" (seq 5) unknown to this harness and not '
        "marked ignorable; refusing to interpret the log — it was likely written by a newer "
        "harness"
    )
