"""Writer exclusion through `session_locks`: holders named, stealing rules, heartbeats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from sqlite_helpers import backend, connect, meta, turn, write

from plugins.session_persistence.errors import SessionLockedError
from plugins.session_persistence.liveness import HOST, pid_alive
from plugins.session_persistence_sqlite.locks import now_ms

pytestmark = pytest.mark.anyio


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def plant(root: Path, pid: int, host: str, age_ms: int) -> None:
    """Put a foreign holder's lock row on session "s1"."""
    with connect(root) as db:
        db.execute(
            "INSERT OR REPLACE INTO session_locks VALUES ('s1', 'foreign', ?, ?, ?)",
            (pid, host, now_ms() - age_ms),
        )


def holder(root: Path) -> tuple[str, int, str] | None:
    with connect(root) as db:
        row = db.execute("SELECT token, pid, host FROM session_locks").fetchone()
    return None if row is None else (row[0], row[1], row[2])


async def test_a_live_holder_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    a, b = backend(tmp_path), backend(tmp_path)
    await a.acquire_writer("s1")
    await a.acquire_writer("s1")  # re-entrant
    with pytest.raises(SessionLockedError) as caught:
        await b.acquire_writer("s1")
    error = caught.value
    assert (error.session_id, error.pid, error.host) == ("s1", os.getpid(), HOST)
    assert (
        str(error) == f'session "s1" is locked by another writer (pid {os.getpid()} on host {HOST})'
    )
    with pytest.raises(SessionLockedError):  # a one-off write is refused too
        await b.append_batch(meta(), turn(0), is_materialized=False)
    assert await b.read_stored_revision("s1") is None
    await write(a, meta(), [turn(0)])
    await a.release_writer("s1")
    assert holder(tmp_path) is None
    await b.acquire_writer("s1")
    await b.aclose()
    assert holder(tmp_path) is None
    await a.aclose()


async def test_a_dead_pid_on_this_host_is_stolen(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await b.list()  # creates the database
    plant(tmp_path, dead_pid(), HOST, age_ms=0)
    await b.acquire_writer("s1")
    found = holder(tmp_path)
    assert found is not None
    assert found[1:] == (os.getpid(), HOST)
    assert found[0] != "foreign"
    await b.aclose()


def test_a_zombie_counts_as_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(child.pid)  # killed but not reaped yet: a zombie
        assert os.path.exists(f"/proc/{child.pid}")
    finally:
        child.wait()
    assert pid_alive(os.getpid())
    assert not pid_alive(0)


@pytest.mark.parametrize(
    ("host", "age_ms", "stolen"),
    [
        ("elsewhere", 29_000, False),
        ("elsewhere", 31_000, True),
        (HOST, 31_000, True),  # our own pid is alive, but its heartbeat is too old
        (HOST, 1_000, False),
    ],
)
async def test_old_heartbeats_are_stolen(
    tmp_path: Path, host: str, age_ms: int, stolen: bool
) -> None:
    b = backend(tmp_path)
    await b.list()
    plant(tmp_path, os.getpid(), host, age_ms)
    if stolen:
        await b.acquire_writer("s1")
        assert (holder(tmp_path) or ("",))[0] != "foreign"
    else:
        with pytest.raises(SessionLockedError) as caught:
            await b.acquire_writer("s1")
        assert (caught.value.pid, caught.value.host) == (os.getpid(), host)
    await b.aclose()


async def test_a_stolen_lock_refuses_the_old_holder(tmp_path: Path) -> None:
    a, b = backend(tmp_path), backend(tmp_path)
    await a.acquire_writer("s1")
    await write(a, meta(), [turn(0)])
    with connect(tmp_path) as db:
        db.execute("UPDATE session_locks SET heartbeat_at = 0")
    await b.acquire_writer("s1")
    with pytest.raises(SessionLockedError):
        await a.append_batch(meta(), turn(8, 2), is_materialized=True)
    await a.aclose()
    assert holder(tmp_path) is not None  # a released only its own token
    await b.aclose()


async def test_the_heartbeat_refreshes_held_locks(tmp_path: Path) -> None:
    b = backend(tmp_path, heartbeat_s=0.02)
    await b.acquire_writer("s1")
    with connect(tmp_path) as db:
        db.execute("UPDATE session_locks SET heartbeat_at = 0")
        for _ in range(500):
            if db.execute("SELECT heartbeat_at FROM session_locks").fetchone() != (0,):
                break
            await anyio.sleep(0.01)
        assert db.execute("SELECT heartbeat_at FROM session_locks").fetchone() != (0,)
    await b.aclose()
    assert "dsh-sqlite-heartbeat" not in {thread.name for thread in threading.enumerate()}
