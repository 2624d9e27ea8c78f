"""The plugin: `sessionPersistence` over PostgreSQL for live sessions, restarts and repairs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_helpers import backend, event, execute, meta, turn
from postgres_support import DSN, PostgresTarget, drop_schema, require_postgres

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from framework.loader import boot, check_manifest
from framework.manifest import load_manifest
from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import SessionLockedError

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

OVERLAY = Path(__file__).resolve().parents[3] / "config" / "overlays" / "postgres.yml"


async def test_a_live_session_survives_a_restart_and_is_locked_while_live(
    postgres: PostgresTarget,
) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        session = ctx.sessions.create("live", meta={"cwd": "/home/u/proj"})
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert await ctx.sessions.flush(session) is True
        with pytest.raises(SessionLockedError):
            await backend(postgres).acquire_writer("live")
        expected = [dumps(e) for e in session.events]
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        loaded = await ctx.sessionPersistence.load("live")
        assert [dumps(e) for e in loaded.events] == expected
        assert [h["id"] for h in await ctx.sessionPersistence.list()] == ["live"]
    assert execute(postgres, "SELECT count(*) FROM dsh_session_owners") == [(0,)]


async def test_load_commits_the_repair_of_an_open_turn(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    opened = [event(5, "turn/start", {"turn": 2}), event(6, "step/start", {"turn": 2, "step": 1})]
    await b.append_batch(meta(), [*turn(0), *opened], is_materialized=False)
    await b.aclose()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        inspected = await ctx.sessionPersistence.inspect("s1")
        assert [e["type"] for e in inspected.events[5:]] == [
            "turn/start",
            "step/start",
            "step/end",
            "turn/end",
        ]
        assert execute(postgres, "SELECT count(*) FROM dsh_events") == [(7,)]
        loaded = await ctx.sessionPersistence.load("s1")
        assert [dumps(e) for e in loaded.events] == [dumps(e) for e in inspected.events]
    rows = execute(postgres, "SELECT seq, type FROM dsh_events ORDER BY seq")
    assert rows[5:] == [(5, "turn/start"), (6, "step/start"), (7, "step/end"), (8, "turn/end")]


def test_the_overlay_swaps_the_persistence_row(tmp_path: Path) -> None:
    base = tmp_path / "app.yml"
    base.write_text(
        "- id: session-persistence\n"
        "  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n"
        "- id: session-checkpoints\n"
        "  name: '@deepseek-ai/dsh-session-checkpoint-policy'\n"
    )
    manifest, problems = load_manifest(base, [OVERLAY])
    assert problems == []
    assert manifest is not None
    rows = {row.id: row for row in manifest.walk()}
    assert rows["session-persistence"].disabled is True
    inserted = rows["session-persistence-postgres"]
    assert inserted.name == "dsh-session-persistence-postgres"
    assert inserted.config == {"dsn": "${DSH_POSTGRES_DSN}"}
    assert check_manifest(base, [OVERLAY], environ={"DSH_POSTGRES_DSN": "host=x"}) == []
    missing = check_manifest(base, [OVERLAY], environ={})
    assert len(missing) == 1
    assert "DSH_POSTGRES_DSN" in missing[0].message


async def test_the_overlay_boots_the_postgres_backend(tmp_path: Path) -> None:
    dsn = require_postgres()
    if dsn == DSN:
        pytest.skip("the overlay's default schema needs a test database of this run's own")
    base = tmp_path / "app.yml"
    base.write_text(
        "- id: sessions\n"
        "  name: dsh-session\n"
        "- id: session-persistence\n"
        "  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n"
    )
    async with boot(base, [OVERLAY], environ={"DSH_POSTGRES_DSN": dsn}) as ctx:
        persistence = ctx.sessionPersistence
        assert persistence.backend.name == "session-persistence-postgres"
        assert persistence.backend.schema == "dsh"
        session = ctx.sessions.create("booted", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
    rows = execute(PostgresTarget(dsn, "dsh"), "SELECT id, next_seq FROM dsh_sessions")
    assert rows == [("booted", 1)]
    drop_schema("dsh")
