"""The original harness's logs: load in place, re-encode byte for byte, copy through both modes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from jsonl_helpers import FIXTURE_NAMES, FIXTURES, MODES, backend

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence_jsonl import JsonlBackend, project_dir, segment

pytestmark = pytest.mark.anyio

NAMES = FIXTURE_NAMES


def place(root: Path, name: str) -> tuple[JsonlBackend, dict[str, object], Path]:
    """Copy fixture `name` to its layout path under a raw-mode backend's root."""
    source = FIXTURES / name
    header = loads(source.read_bytes().split(b"\n", 1)[0])
    b = JsonlBackend(root, compression="none")
    path = root / project_dir(header.get("cwd")) / segment(header["id"]) / "session.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copyfile(source, path)
    return b, header, path


def test_all_four_fixtures_are_present() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.jsonl")) == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
async def test_fixture_loads_and_rewrites_byte_for_byte(tmp_path: Path, name: str) -> None:
    b, header, path = place(tmp_path / "in", name)
    original = path.read_bytes()
    stored = await b.load_stored(str(header["id"]))
    assert stored is not None
    assert stored.torn_marker is None
    events = stored.events
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(e["type"] != "session" and not e["type"].endswith("-chunks") for e in events)
    packed_rows = original.count(b'-chunks","seq0"')
    if packed_rows:
        assert len(events) > original.count(b"\n") - 1
    # Re-write the same events as one raw batch with packing on: every event line is identical.
    out = JsonlBackend(tmp_path / "out", compression="none")
    await out.append_batch(stored.meta, events, is_materialized=False)
    rewritten = await out.read_raw(str(header["id"]))
    assert rewritten.split(b"\n", 1)[1] == original.split(b"\n", 1)[1]
    if "delegationDepth" in header:
        assert rewritten == original  # headers match too when the original wrote the field
    assert stored.meta["delegationDepth"] == header.get("delegationDepth", 0)


async def test_original_only_event_types_are_kept(tmp_path: Path) -> None:
    b, header, _ = place(tmp_path, "goal-multi-turn-actions.jsonl")
    stored = await b.load_stored(str(header["id"]))
    assert stored is not None
    kinds = {e["type"] for e in stored.events}
    assert {
        "permission/preset",
        "sandbox/mode",
        "approval/policy",
        "command/run",
        "goal/change",
    } <= kinds
    chunks = [e for e in stored.events if e["type"] == "assistant/chunk"]
    assert {e["data"]["chunk"]["type"] for e in chunks} >= {
        "text-delta",
        "reasoning-delta",
        "tool-call-delta",
    }


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", MODES)
async def test_copy_keeps_the_logical_events(tmp_path: Path, name: str, mode: str) -> None:
    b, header, _ = place(tmp_path / "in", name)
    stored = await b.load_stored(str(header["id"]))
    assert stored is not None
    for pack in (True, False):
        target = backend(tmp_path / f"{mode}-{pack}", mode, pack_chunks=pack)
        events = stored.events
        # Write in a few batches, as a live session would.
        cuts = [0, len(events) // 3, 2 * len(events) // 3, len(events)]
        for i in range(3):
            await target.append_batch(
                stored.meta, events[cuts[i] : cuts[i + 1]], is_materialized=i > 0
            )
        copied = await backend(tmp_path / f"{mode}-{pack}", mode).load_stored(str(header["id"]))
        assert copied is not None
        assert [dumps(e) for e in copied.events] == [dumps(e) for e in events]
        assert copied.meta == stored.meta
        assert copied.torn_marker is None
