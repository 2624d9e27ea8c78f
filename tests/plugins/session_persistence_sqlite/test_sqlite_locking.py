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
from sqlite_helpers import backend, connect, create_database, meta, turn, write

from plugins.session_persistence.errors import SessionLockedError, WriterLockLostError
from plugins.session_persistence.liveness import HOST, pid_alive, process_identity
from plugins.session_persistence_sqlite.locks import holder_alive, new_token, now_ms

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
    create_database(tmp_path)
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
        (HOST, 31_000, False),  # our own pid is alive: never taken over, however stale
        (HOST, 10**9, False),
        (HOST, 1_000, False),
    ],
)
async def test_old_heartbeats_are_stolen(
    tmp_path: Path, host: str, age_ms: int, stolen: bool
) -> None:
    b = backend(tmp_path)
    create_database(tmp_path)
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
    """Across hosts a stale heartbeat is taken over; the old holder finds out at its next
    write and writes nothing."""
    a, b = backend(tmp_path), backend(tmp_path, host="elsewhere")
    await a.acquire_writer("s1")
    await write(a, meta(), [turn(0)])
    with pytest.raises(SessionLockedError):  # the heartbeat is fresh
        await b.acquire_writer("s1")
    with connect(tmp_path) as db:
        db.execute("UPDATE session_locks SET heartbeat_at = 0")
    await b.acquire_writer("s1")
    with pytest.raises(WriterLockLostError) as caught:
        await a.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert str(caught.value) == (
        f'session "s1" lost its writer lock to another writer (now pid {os.getpid()} on host '
        "elsewhere); this process no longer owns it and stops writing: reload the session to "
        "go on"
    )
    assert (caught.value.pid, caught.value.host) == (os.getpid(), "elsewhere")
    with connect(tmp_path) as db:
        assert db.execute("SELECT next_seq FROM sessions").fetchone() == (8,)
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


def test_a_reused_pid_or_a_reboot_frees_the_lock() -> None:
    """The token records the holder's boot id and start time: the same pid naming a later
    process (or any process after a reboot) is not the holder."""
    token = new_token()
    identity = process_identity(os.getpid())
    assert identity is not None
    assert token.endswith(f"@{identity}")
    assert holder_alive(os.getpid(), token)
    boot, start = identity.split("/")
    assert not holder_alive(os.getpid(), f"x@{boot}/{int(start) + 1}")  # a reused pid
    assert not holder_alive(os.getpid(), f"x@another-boot/{start}")  # before a reboot
    assert holder_alive(os.getpid(), "legacy-token-without-identity")
    assert not holder_alive(dead_pid(), token)


SIGSTOPPED_CHILD = """
import sys, anyio
from pathlib import Path
from plugins.session_persistence_sqlite import SqliteBackend

async def main() -> None:
    b = SqliteBackend(Path(sys.argv[1]), heartbeat_s=3600)
    await b.acquire_writer("s1")
    print("locked", flush=True)
    await anyio.sleep(120)

anyio.run(main)
"""


def stopped_holder(database: Path) -> subprocess.Popen[str]:
    """A real child holding session "s1"'s lock, then SIGSTOPped."""
    child = subprocess.Popen(
        [sys.executable, "-c", SIGSTOPPED_CHILD, str(database)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    os.kill(child.pid, signal.SIGSTOP)
    return child


def reap(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    os.kill(child.pid, signal.SIGCONT)
    child.wait()


async def test_a_sigstopped_owner_on_this_host_keeps_its_lock(tmp_path: Path) -> None:
    """R13: a paused owner is alive; however old its heartbeat, nobody on this host takes over."""
    b = backend(tmp_path)
    create_database(tmp_path)
    child = stopped_holder(tmp_path / "db" / "sessions.sqlite3")
    try:
        with connect(tmp_path) as db:
            db.execute("UPDATE session_locks SET heartbeat_at = 0")  # stale for hours
        with pytest.raises(SessionLockedError) as caught:
            await b.acquire_writer("s1")
        assert (caught.value.pid, caught.value.host) == (child.pid, HOST)
        with pytest.raises(SessionLockedError):
            await b.append_batch(meta(), turn(0), is_materialized=False)
        assert await b.read_stored_revision("s1") is None
    finally:
        reap(child)
    await b.acquire_writer("s1")  # dead now: taken over at once
    await b.aclose()
