"""The original harness's logs copy through PostgreSQL with the same logical events."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pg_helpers import backend
from postgres_support import PostgresTarget

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence import StoredLog
from plugins.session_persistence.testing import FIXTURE_NAMES, FIXTURES
from plugins.session_persistence_jsonl import JsonlBackend, project_dir, segment

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

NAMES = FIXTURE_NAMES


async def original(root: Path, name: str) -> StoredLog:
    """Fixture `name` as the JSONL backend reads it (packed rows expanded)."""
    source = FIXTURES / name
    header = loads(source.read_bytes().split(b"\n", 1)[0])
    path = root / project_dir(header.get("cwd")) / segment(header["id"]) / "session.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    stored = await JsonlBackend(root, compression="none").load_stored(header["id"])
    assert stored is not None
    return stored


def test_the_four_fixtures_are_present() -> None:
    assert len(NAMES) == 4


@pytest.mark.parametrize("name", NAMES)
async def test_fixture_copies_through(tmp_path: Path, postgres: PostgresTarget, name: str) -> None:
    stored = await original(tmp_path, name)
    events = stored.events
    writer = backend(postgres)
    cuts = [0, len(events) // 3, 2 * len(events) // 3, len(events)]
    for i in range(3):
        await writer.append_batch(stored.meta, events[cuts[i] : cuts[i + 1]], is_materialized=i > 0)
    await writer.aclose()
    copied = await backend(postgres).load_stored(stored.meta["id"])
    assert copied is not None
    assert copied.torn_marker is None
    assert copied.meta == stored.meta
    assert [dumps(e) for e in copied.events] == [dumps(e) for e in events]
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        inspected = await ctx.sessionPersistence.inspect(stored.meta["id"])
    assert [dumps(e) for e in inspected.events[: len(events)]] == [dumps(e) for e in events]
