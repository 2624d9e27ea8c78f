"""Writer exclusion: advisory locks on a dedicated connection, owner rows, process death,
transient transaction locks, and a dropped lock connection."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import psycopg
import pytest
from pg_helpers import backend, event, execute, meta, turn, until
from postgres_support import PostgresTarget

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session_persistence.errors import SessionLockedError, WriterLockLostError
from plugins.session_persistence_postgres import PostgresBackend, lock_key

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

CHILD = Path(__file__).with_name("pg_child.py")
ROOT = Path(__file__).resolve().parents[3]


def spawn_holder(target: PostgresTarget, session_id: str) -> subprocess.Popen[str]:
    """A child process that holds `session_id`'s writer lock once it printed `ready`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "hold", target.dsn, target.schema, session_id],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def terminate_lock_connection(target: PostgresTarget, b: PostgresBackend) -> None:
    """Kill the backend's lock connection on the server and wait until it is gone."""
    pid = b._lock_pid
    execute(target, "SELECT pg_terminate_backend(%s)", pid)
    for _ in range(500):
        if execute(target, "SELECT count(*) FROM pg_locks WHERE pid = %s", pid) == [(0,)]:
            return
        time.sleep(0.01)
    raise AssertionError(f"server process {pid} did not exit")


def test_lock_key_is_the_first_8_bytes_of_sha256_signed() -> None:
    digest = hashlib.sha256(b"dsh-session:abc").digest()
    assert lock_key("abc") == int.from_bytes(digest[:8], "big", signed=True)
    assert -(2**63) <= lock_key("\ud800 x") < 2**63


async def test_live_lock_excludes_other_instances_and_names_the_owner(
    postgres: PostgresTarget,
) -> None:
    owner, other = backend(postgres), backend(postgres)
    await owner.append_batch(meta(), turn(0), is_materialized=False)
    await owner.acquire_writer("s1")
    await owner.acquire_writer("s1")  # re-entrant
    with pytest.raises(SessionLockedError) as caught:
        await other.acquire_writer("s1")
    error = caught.value
    assert (error.session_id, error.pid, error.host) == ("s1", os.getpid(), socket.gethostname())
    assert str(error) == (
        f'session "s1" is locked by another writer (pid {os.getpid()} on host '
        f"{socket.gethostname()})"
    )
    await other.load_stored("s1")
    with pytest.raises(SessionLockedError):  # a transient write: pg_try_advisory_xact_lock
        await other.append_batch(meta(), turn(5, 2), is_materialized=True)
    locks = execute(
        postgres,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
        owner._lock_pid,
    )
    assert locks == [(1,)]
    await owner.release_writer("s1")
    assert execute(postgres, "SELECT count(*) FROM dsh_session_owners") == [(0,)]
    await other.acquire_writer("s1")
    await other.append_batch(meta(), turn(5, 2), is_materialized=True)
    await other.aclose()
    await owner.aclose()


async def test_aclose_frees_every_lock_and_owner_row(postgres: PostgresTarget) -> None:
    owner, other = backend(postgres), backend(postgres)
    for session_id in ("a", "b"):
        await owner.acquire_writer(session_id)
    assert execute(postgres, "SELECT count(*) FROM dsh_session_owners") == [(2,)]
    await owner.aclose()
    assert execute(postgres, "SELECT count(*) FROM dsh_session_owners") == [(0,)]
    for session_id in ("a", "b"):
        await other.acquire_writer(session_id)
    await other.aclose()


async def test_a_dropped_lock_connection_is_reacquired_on_the_next_write(
    postgres: PostgresTarget,
) -> None:
    owner = backend(postgres)
    await owner.acquire_writer("s1")
    await owner.append_batch(meta(), turn(0), is_materialized=False)
    first_pid = owner._lock_pid
    terminate_lock_connection(postgres, owner)
    await owner.append_batch(meta(), turn(5, 2), is_materialized=True)
    assert owner._lock_pid != first_pid
    other = backend(postgres)
    with pytest.raises(SessionLockedError):
        await other.acquire_writer("s1")
    await owner.aclose()
    await other.aclose()


async def test_a_dropped_lock_connection_is_retaken_at_once_without_a_write(
    postgres: PostgresTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """The watcher notices the dropped connection by itself and re-takes the lock at once, so
    no other writer can slip in before the owner's next write."""
    owner, other = backend(postgres), backend(postgres)
    await owner.acquire_writer("s1")
    await owner.append_batch(meta(), turn(0), is_materialized=False)
    first_pid = owner._lock_pid
    terminate_lock_connection(postgres, owner)
    await until(lambda: owner._lock_pid != first_pid, "the lock connection was replaced")
    key = lock_key("s1")
    held = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
    await until(
        lambda: (
            execute(postgres, held + " AND objid = %s", key & 0xFFFFFFFF) == [(owner._lock_pid,)]
        ),
        "the lock was re-taken",
    )
    with pytest.raises(SessionLockedError):
        await other.acquire_writer("s1")
    assert "the writer-lock connection dropped; re-took 1 lock(s)" in caplog.text
    await owner.append_batch(meta(), turn(5, 2), is_materialized=True)
    await owner.aclose()
    await other.aclose()


async def test_a_dropped_lock_taken_by_another_writer_stops_the_owner(
    postgres: PostgresTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """pg_terminate_backend of the lock connection while another connection waits for the
    lock: it wins, the owner's watcher finds out at once, and every later write of the owner
    fails closed (WriterLockLostError) until it lets the session go."""
    owner = backend(postgres)
    await owner.acquire_writer("s1")
    await owner.append_batch(meta(), turn(0), is_materialized=False)
    async with await psycopg.AsyncConnection.connect(postgres.dsn, autocommit=True) as thief:
        async with anyio.create_task_group() as group:
            group.start_soon(thief.execute, "SELECT pg_advisory_lock(%s)", (lock_key("s1"),))
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            await until(lambda: execute(postgres, waiting) == [(1,)], "the thief waits")
            terminate_lock_connection(postgres, owner)
        await until(lambda: "lost session" in caplog.text, "the owner noticed")
        assert 'lost session "s1"' in caplog.text
        with pytest.raises(WriterLockLostError) as caught:
            await owner.append_batch(meta(), turn(5, 2), is_materialized=True)
        assert str(caught.value).startswith('session "s1" lost its writer lock to another writer')
        await thief.execute("SELECT pg_advisory_unlock(%s)", (lock_key("s1"),))
    with pytest.raises(WriterLockLostError):  # free again, but the owner stopped for good
        await owner.append_batch(meta(), turn(5, 2), is_materialized=True)
    with pytest.raises(WriterLockLostError):
        await owner.acquire_writer("s1")
    assert execute(postgres, "SELECT next_seq FROM dsh_sessions") == [(5,)]
    await owner.release_writer("s1")  # letting it go ends the refusal; a new binding may write
    await owner.acquire_writer("s1")
    await owner.append_batch(meta(), turn(5, 2), is_materialized=True)
    await owner.aclose()


async def test_process_death_frees_the_lock_for_a_repairing_takeover(
    postgres: PostgresTarget,
) -> None:
    child = spawn_holder(postgres, "held")
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(pg, postgres.config())
        persistence = ctx.sessionPersistence
        try:
            with pytest.raises(SessionLockedError) as caught:
                await persistence.load("held")  # the repair needs the lock
            assert (caught.value.pid, caught.value.host) == (child.pid, socket.gethostname())
            revision = await persistence.backend.read_stored_revision("held")
            inspected = await persistence.inspect("held")  # reads never lock
            assert [e["type"] for e in inspected.events] == [
                "turn/start",
                "step/start",
                "step/end",
                "turn/end",
            ]
            assert await persistence.backend.read_stored_revision("held") == revision
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        # At once: the lock of a dead holder on this host is waited for until the server
        # notices the closed connection and frees it.
        loaded = await persistence.load("held")
        assert [e["type"] for e in loaded.events][2:] == ["step/end", "turn/end"]
        assert loaded.events[-1]["data"]["reason"] == {"kind": "interrupted"}
        await persistence.append("held", [event(4, "turn/start", {"turn": 2})])
    stored = await backend(postgres).load_stored("held")
    assert stored is not None
    assert [e["seq"] for e in stored.events] == [0, 1, 2, 3, 4]


async def test_concurrent_acquires_lock_once_so_one_release_frees(
    postgres: PostgresTarget,
) -> None:
    owner, other = backend(postgres), backend(postgres)
    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(owner.acquire_writer, "s1")
    await owner.release_writer("s1")
    await other.acquire_writer("s1")
    await owner.aclose()
    await other.aclose()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_a_dead_holder_on_this_host_is_waited_for_until_the_server_frees_it(
    postgres: PostgresTarget,
) -> None:
    holder, taker = backend(postgres), backend(postgres)
    try:
        await holder.acquire_writer("s1")
        execute(postgres, "UPDATE dsh_session_owners SET pid = %s", dead_pid())
        async with anyio.create_task_group() as group:
            group.start_soon(taker.acquire_writer, "s1")
            await anyio.sleep(0.2)
            await holder.release_writer("s1")  # what the server does once it sees the death
        assert "s1" in taker._held
    finally:
        await holder.aclose()
        await taker.aclose()


async def test_a_dead_holder_on_another_host_is_refused_at_once(postgres: PostgresTarget) -> None:
    holder, taker = backend(postgres), backend(postgres)
    await holder.acquire_writer("s1")
    pid = dead_pid()
    execute(postgres, "UPDATE dsh_session_owners SET pid = %s, host = 'elsewhere'", pid)
    with anyio.fail_after(1), pytest.raises(SessionLockedError) as caught:
        await taker.acquire_writer("s1")
    assert (caught.value.pid, caught.value.host) == (pid, "elsewhere")
    await holder.aclose()
    await taker.aclose()
