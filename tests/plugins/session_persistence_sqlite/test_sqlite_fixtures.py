"""The original harness's logs copied through SQLite keep the same logical events."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlite_helpers import FIXTURE_NAMES, FIXTURES, backend, connect

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence_jsonl import JsonlBackend, project_dir, segment

pytestmark = pytest.mark.anyio

NAMES = FIXTURE_NAMES


async def read_fixture(root: Path, name: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The fixture's meta and decoded events, read by the JSONL backend in place."""
    source = FIXTURES / name
    header = loads(source.read_bytes().split(b"\n", 1)[0])
    path = root / project_dir(header.get("cwd")) / segment(header["id"]) / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(source.read_bytes())
    stored = await JsonlBackend(root, compression="none").load_stored(header["id"])
    assert stored is not None
    return stored.meta, stored.events


def test_all_four_fixtures_are_present() -> None:
    assert len(NAMES) == 4


@pytest.mark.parametrize("name", NAMES)
async def test_copy_keeps_the_logical_events(tmp_path: Path, name: str) -> None:
    meta, events = await read_fixture(tmp_path / "jsonl", name)
    target = backend(tmp_path)
    cuts = [0, len(events) // 3, 2 * len(events) // 3, len(events)]
    for i in range(3):  # a few batches, as a live session writes them
        await target.append_batch(meta, events[cuts[i] : cuts[i + 1]], is_materialized=i > 0)
    await target.aclose()
    copied = await backend(tmp_path).load_stored(str(meta["id"]))
    assert copied is not None
    assert copied.torn_marker is None
    assert copied.meta == meta
    assert [dumps(e) for e in copied.events] == [dumps(e) for e in events]
    with connect(tmp_path) as db:
        (rows,) = db.execute("SELECT count(*) FROM events").fetchone()
        packed = db.execute("SELECT count(*) FROM events WHERE ignorable = 0").fetchone()[0]
    source = (FIXTURES / name).read_bytes()
    if b'-chunks","seq0"' in source:
        assert packed > 0
        assert rows < len(events)
