"""Reading a session database never writes: `dsh sessions` and `dsh show` work on a read-only
mount (a real `mount --bind -o ro`, skipped where this process may not mount)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from sqlite_helpers import meta, open_turn, turn

from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.testing import running
from plugins.session_persistence_sqlite import SqliteBackend

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
OVERLAY = ROOT / "config" / "overlays" / "sqlite.yml"


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """`(writable folder, the same folder mounted read-only)`."""
    source, mounted = tmp_path / "home", tmp_path / "ro"
    source.mkdir(mode=0o700)
    mounted.mkdir(mode=0o700)
    done = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(source), str(mounted)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only here: {done.stderr.strip()}")
    try:
        yield source, mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


async def test_reads_open_read_only_and_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db" / "sessions.sqlite3"
    b = SqliteBackend(path)
    assert await b.list() == []
    assert await b.load_stored("s1") is None
    assert not path.parent.exists()  # no folder, no file: reading created nothing
    await b.append_batch(meta(), turn(0), is_materialized=False)  # a write opens read-write
    assert [h["id"] for h in await b.list()] == ["s1"]
    await b.aclose()


async def test_list_and_inspect_work_on_a_read_only_mount(read_only: tuple[Path, Path]) -> None:
    source, mounted = read_only
    writer = SqliteBackend(source / "sessions.sqlite3")
    await writer.append_batch(meta(), turn(0) + open_turn(8, 2), is_materialized=False)
    await writer.aclose()
    async with running(SqliteBackend(mounted / "sessions.sqlite3")) as world:
        assert [h["id"] for h in await world.service.list()] == ["s1"]
        log = await world.service.inspect("s1")
        assert log.events[-1]["type"] == "turn/end"  # closed in memory, nothing written
        with pytest.raises(SessionPersistenceError) as caught:
            await world.service.load("s1")  # repairing is a write: refused, clearly
        assert f'session database at "{mounted / "sessions.sqlite3"}"' in str(caught.value)


def test_dsh_sessions_and_show_on_a_read_only_home(read_only: tuple[Path, Path]) -> None:
    source, mounted = read_only
    dsh = str(Path(sys.executable).parent / "dsh")

    def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
        env.update(DSH_HOME=str(home), DSH_WORKSPACE=str(home.parent / "workspace"))
        return subprocess.run(
            [dsh, *args, "--patch", str(OVERLAY)],
            capture_output=True,
            text=True,
            env=env,
            cwd=home.parent,
            timeout=60,
        )

    async def seed() -> None:
        writer = SqliteBackend(source / "sessions.sqlite3")
        await writer.append_batch(meta("s-ro"), turn(0), is_materialized=False)
        await writer.aclose()

    anyio.run(seed)
    listed = run(mounted, "sessions")
    assert listed.returncode == 0, listed.stderr
    assert "s-ro" in listed.stdout
    shown = run(mounted, "show", "s-ro")
    assert shown.returncode == 0, shown.stderr


KILLED_WRITER = """
import os, signal, sys, anyio
from pathlib import Path
from plugins.session_persistence_sqlite import SqliteBackend

async def main() -> None:
    b = SqliteBackend(Path(sys.argv[1]))
    for seq in range(3):
        event = {"type": "turn/start", "seq": seq, "time": 1, "data": {"turn": seq + 1}}
        meta = {"version": 0, "id": "s1", "createdAt": 1}
        await b.append_batch(meta, [event], is_materialized=seq > 0)
    os.kill(os.getpid(), signal.SIGKILL)  # the WAL and its index stay behind

anyio.run(main)
"""


@pytest.mark.parametrize("index", ["kept", "lost"])
async def test_a_crashed_writers_wal_on_a_read_only_mount(
    read_only: tuple[Path, Path], index: str
) -> None:
    """Committed transactions still in the WAL are read, or refused clearly when the WAL's
    index is gone and cannot be rebuilt there; never silently skipped."""
    source, mounted = read_only
    database = source / "sessions.sqlite3"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = await anyio.run_process(
        [sys.executable, "-c", KILLED_WRITER, str(database)], env=env, check=False
    )
    assert child.returncode == -9
    assert Path(f"{database}-wal").stat().st_size > 0
    if index == "lost":
        Path(f"{database}-shm").unlink()
    b = SqliteBackend(mounted / "sessions.sqlite3")
    if index == "kept":
        stored = await b.load_stored("s1")
        assert stored is not None
        assert [e["seq"] for e in stored.events] == [0, 1, 2]
    else:
        with pytest.raises(SessionPersistenceError, match="its write-ahead log holds committed"):
            await b.load_stored("s1")
    await b.aclose()


FULL_DISK_WRITER = """
import sys, anyio
from pathlib import Path
from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence_sqlite import SqliteBackend

async def main() -> None:
    b = SqliteBackend(Path(sys.argv[1]))
    meta = {"version": 0, "id": "s1", "createdAt": 1}
    try:
        for seq in range(10_000):
            data = {"turn": 1, "blob": str(seq) * 20_000}
            event = {"type": "turn/start", "seq": seq, "time": 1, "data": data}
            await b.append_batch(meta, [event], is_materialized=seq > 0)
    except SessionPersistenceError as error:
        print(error)
    await b.aclose()

anyio.run(main)
"""


async def test_a_full_file_system_is_a_clear_error(tmp_path: Path) -> None:
    """The WAL and its -shm index cannot grow on a full tmpfs: SQLite's error, named, in a
    process that lives on (no SIGBUS)."""
    small = tmp_path / "small"
    small.mkdir(mode=0o700)
    mounted = await anyio.run_process(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(small)], check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        database = small / "sessions.sqlite3"
        child = await anyio.run_process(
            [sys.executable, "-c", FULL_DISK_WRITER, str(database)], env=env, check=False
        )
        assert child.returncode == 0, child.stderr.decode()
        assert child.stdout.decode().startswith(f'session database at "{database}": SQLITE_FULL')
    finally:
        await anyio.run_process(["umount", str(small)])
