"""Single-writer exclusion (docs/backends.md): session.lock, SessionLockedError, stale writers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from jsonl_helpers import MODES, backend, meta, open_turn, turn, write

from plugins.session_persistence import Owner
from plugins.session_persistence.errors import (
    SessionLockedError,
    SessionPersistenceError,
    StaleWriterError,
)
from plugins.session_persistence_jsonl import backend as backend_module
from plugins.session_persistence_jsonl import lock
from plugins.session_persistence_jsonl.lock import WriterLock

pytestmark = pytest.mark.anyio

CHILD = """
import json, sys, anyio
from plugins.session_persistence_jsonl import JsonlBackend

async def main() -> None:
    root, mode = sys.argv[1], sys.argv[2]
    meta, extra = json.loads(sys.argv[3]), json.loads(sys.argv[4])
    b = JsonlBackend(root, compression=mode)
    await b.acquire_writer(meta["id"])
    stored = await b.load_stored(meta["id"])
    await b.append_batch(meta, extra, is_materialized=True)
    print("ready", flush=True)
    await anyio.sleep(120)

anyio.run(main)
"""


def spawn_owner(root: Path, mode: str, extra: list[dict[str, object]]) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), mode, json.dumps(meta()), json.dumps(extra)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


@pytest.mark.parametrize("mode", MODES)
async def test_second_process_is_locked_out_until_the_owner_dies(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    stored = await b.load_stored("s1")
    assert stored is not None
    child = spawn_owner(tmp_path / "sessions", mode, open_turn(8, 2))
    try:
        owned = path.read_bytes()
        host = socket.gethostname()
        text = f'session "s1" is locked by another writer (pid {child.pid} on host {host})'
        for attempt in (
            b.acquire_writer("s1"),
            b.append_batch(meta(), turn(8, 2), is_materialized=True),
            b.commit_repair(meta(), None, turn(8, 2)),
        ):
            with pytest.raises(SessionLockedError) as caught:
                await attempt
            assert str(caught.value) == text
            assert (caught.value.session_id, caught.value.pid, caught.value.host) == (
                "s1",
                child.pid,
                host,
            )
        assert path.read_bytes() == owned
        # Reads never lock.
        seen = await b.load_stored("s1")
        assert seen is not None
        assert seen.events == turn(0) + open_turn(8, 2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    await b.acquire_writer("s1")
    assert (path.parent / "session.lock").read_text().startswith(f'{{"pid":{os.getpid()},')
    repaired = await b.load_stored("s1")
    assert repaired is not None
    await b.commit_repair(repaired.meta, repaired.torn_marker, [])  # nothing torn: no-op
    await b.append_batch(meta(), turn(14, 3), is_materialized=True)
    final = await backend(tmp_path, mode).load_stored("s1")
    assert final is not None
    assert final.events == turn(0) + open_turn(8, 2) + turn(14, 3)
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_stale_writer_is_refused(tmp_path: Path, mode: str) -> None:
    a = backend(tmp_path, mode)
    path = await write(a, meta(), [turn(0)])
    b = backend(tmp_path, mode)
    assert await b.load_stored("s1") is not None
    await a.append_batch(meta(), turn(8, 2), is_materialized=True)  # behind b's back
    before = path.read_bytes()
    for attempt in (
        b.append_batch(meta(), turn(8, 3), is_materialized=True),
        b.commit_repair(meta(), None, turn(8, 3)),
    ):
        with pytest.raises(StaleWriterError) as caught:
            await attempt
        assert str(caught.value) == (
            'session "s1" changed on disk since this process last read it; reload it before writing'
        )
    assert path.read_bytes() == before
    fresh = backend(tmp_path, mode)
    with pytest.raises(StaleWriterError):  # never read: nothing known about the storage
        await fresh.append_batch(meta(), turn(16, 3), is_materialized=True)
    assert await b.load_stored("s1") is not None
    await b.append_batch(meta(), turn(16, 3), is_materialized=True)


@pytest.mark.parametrize("mode", MODES)
async def test_live_lock_is_held_until_release_and_non_live_writes_only_briefly(
    tmp_path: Path, mode: str
) -> None:
    a = backend(tmp_path, mode)
    b = backend(tmp_path, mode)
    path = await write(a, meta(), [turn(0)])  # a non-live write: lock held for that write only
    await b.acquire_writer("s1")
    await b.acquire_writer("s1")  # re-entrant
    with pytest.raises(SessionLockedError) as caught:
        await a.acquire_writer("s1")
    assert caught.value.pid == os.getpid()
    await b.release_writer("s1")
    await b.release_writer("s1")  # no-op
    await a.acquire_writer("s1")
    await a.aclose()
    await b.acquire_writer("s1")
    await b.aclose()
    assert (path.parent / "session.lock").exists()  # never deleted


async def test_new_sessions_lock_before_the_link(tmp_path: Path) -> None:
    a = backend(tmp_path, "zstd")
    await a.acquire_writer("s1")  # nothing stored yet: locked when the log is created
    b = backend(tmp_path, "zstd")
    await b.acquire_writer("s1")  # also pending
    await a.append_batch(meta(), turn(0), is_materialized=False)
    with pytest.raises(SessionLockedError):
        await b.append_batch(meta(), turn(0), is_materialized=False)
    with pytest.raises(SessionLockedError):
        await backend(tmp_path, "zstd").acquire_writer("s1")
    await a.aclose()
    await b.aclose()


async def test_creation_under_a_foreign_lock_writes_nothing(tmp_path: Path) -> None:
    b = backend(tmp_path, "none")
    directory = Path(b.locate(meta()).path).parent
    directory.mkdir(parents=True)
    held = WriterLock.acquire("s1", str(directory / "session.lock"))
    (directory / "session.lock").write_text("garbage")
    try:
        with pytest.raises(SessionLockedError) as caught:
            await b.append_batch(meta(), turn(0), is_materialized=False)
        assert str(caught.value) == (
            'session "s1" is locked by another writer (pid unknown on host unknown)'
        )
        assert sorted(p.name for p in directory.iterdir()) == ["session.lock"]
    finally:
        held.release()
    await b.append_batch(meta(), turn(0), is_materialized=False)


@pytest.mark.parametrize("proc_locks", [True, False])
async def test_the_lock_holder_is_read_without_taking_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc_locks: bool
) -> None:
    """`/proc/locks` names the holder; without it a shared probe does; neither takes the lock."""
    if not proc_locks:
        monkeypatch.setattr(lock, "lock_table", lambda: lock.LockTable(None))
    holder, reader = backend(tmp_path, "none"), backend(tmp_path, "none")
    await write(holder, meta(), [turn(0)])
    assert await reader.owner("s1") is None
    await holder.acquire_writer("s1")
    assert await holder.owner("s1") is None  # this instance holds it
    assert await reader.owner("s1") == Owner(os.getpid(), socket.gethostname())
    await holder.append_batch(meta(), turn(8, 2), is_materialized=True)  # still the holder's
    await holder.release_writer("s1")
    assert await reader.owner("s1") is None
    await reader.acquire_writer("s1")
    await reader.aclose()
    await holder.aclose()


@pytest.mark.parametrize("proc_locks", [True, False])
async def test_owners_says_what_owner_says_reading_the_lock_table_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc_locks: bool
) -> None:
    """A listing's batch probe: free, held elsewhere, held here and missing ids answer as
    `owner` does, with one read of `/proc/locks` for the lot (none without it)."""
    reads: list[None] = []

    def lock_table() -> lock.LockTable:
        reads.append(None)
        return real() if proc_locks else lock.LockTable(None)

    real = lock.lock_table
    monkeypatch.setattr(lock, "lock_table", lock_table)
    monkeypatch.setattr(backend_module, "lock_table", lock_table)
    holder, reader = backend(tmp_path, "none"), backend(tmp_path, "none")
    for name in ("s1", "s2", "s3"):
        await write(holder, meta(name), [turn(0)])
    await holder.acquire_writer("s2")
    await reader.acquire_writer("s3")
    ids = ["s1", "s2", "s3", "missing"]
    found = await reader.owners(ids)
    assert len(reads) == 1
    running = Owner(os.getpid(), socket.gethostname())
    assert found == {"s1": None, "s2": running, "s3": None, "missing": None}
    assert found == {i: await reader.owner(i) for i in ids}
    await reader.aclose()
    await holder.aclose()


async def test_owners_leaves_out_an_id_whose_probe_fails(tmp_path: Path) -> None:
    """The refused id is missing from the batch; probing it alone raises why."""
    b = backend(tmp_path, "none")
    await write(b, meta("s1"), [turn(0)])
    project = Path(b.locate(meta("s1")).path).parent.parent
    (project / "flat.jsonl").write_text("")
    assert await b.owners(["flat", "s1"]) == {"s1": None}
    with pytest.raises(SessionPersistenceError, match="flat"):
        await b.owner("flat")
    await b.aclose()
