"""A live log's writer reserves its next blocks past the end (`reserve`, docs/persistence.md):
the log's bytes never change, what is reserved is freed when the writer lets the log go, and a
file system without `fallocate` (or a full disk) only means nothing is reserved."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest
from jsonl_helpers import MODES, backend, meta, turn

from plugins.session_persistence import reserve as reserve_module
from plugins.session_persistence.reserve import keep_size_fallocate
from plugins.session_persistence_jsonl import FileOps, JsonlBackend
from plugins.session_persistence_jsonl.backend import RESERVE_BYTES

pytestmark = pytest.mark.anyio

#: Events in one `turn(...)`.
TURN = len(turn(0))


class CountingOps(FileOps):
    """Counts `reserve` and `ftruncate` calls; `reserving=False`: a file system without it."""

    def __init__(self, *, reserving: bool = True) -> None:
        self.reserving = reserving
        self.reserves: list[tuple[int, int]] = []
        self.truncates = 0

    def reserve(self, fd: int, offset: int, length: int) -> bool:
        self.reserves.append((offset, length))
        return self.reserving and super().reserve(fd, offset, length)

    def ftruncate(self, fd: int, length: int) -> None:
        self.truncates += 1
        super().ftruncate(fd, length)


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def supported(tmp_path: Path) -> None:
    """Skip where `tmp_path`'s file system cannot reserve blocks past a file's end."""
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if not keep_size_fallocate(fd, 0, RESERVE_BYTES):
            pytest.skip("this file system has no fallocate(FALLOC_FL_KEEP_SIZE)")
    finally:
        os.close(fd)
        probe.unlink()


async def _live(b: JsonlBackend, turns: int, session: str = "s1") -> Path:
    """A live session's log: created, then `turns` more turns appended by its writer."""
    m = meta(session)
    await b.acquire_writer(session)
    await b.append_batch(m, turn(0), is_materialized=False)
    for k in range(1, turns + 1):
        await b.append_batch(m, turn(k * TURN, turn_no=k + 1), is_materialized=True)
    return Path(b.locate(m).path)


@pytest.mark.usefixtures("supported")
@pytest.mark.parametrize("mode", MODES)
async def test_a_live_writer_reserves_once_per_chunk_and_frees_it_on_release(
    tmp_path: Path, mode: str
) -> None:
    ops = CountingOps()
    b = backend(tmp_path, mode, fileops=ops)
    path = await _live(b, 5)
    size = os.stat(path).st_size
    assert len(ops.reserves) == 1  # not on the first append, then once for the chunk
    assert _allocated(path) >= size + RESERVE_BYTES // 2
    await b.release_writer("s1")
    assert os.stat(path).st_size == size
    assert _allocated(path) < size + RESERVE_BYTES // 2
    assert ops.truncates == 1
    await b.aclose()


@pytest.mark.usefixtures("supported")
async def test_aclose_frees_what_its_writers_reserved(tmp_path: Path) -> None:
    b = backend(tmp_path, "none")
    paths = [await _live(b, 2, f"s{k}") for k in range(3)]
    assert all(_allocated(p) > os.stat(p).st_size + RESERVE_BYTES // 2 for p in paths)
    await b.aclose()
    assert all(_allocated(p) < os.stat(p).st_size + RESERVE_BYTES // 2 for p in paths)


@pytest.mark.parametrize("mode", MODES)
async def test_the_log_bytes_are_the_same_with_and_without_reserving(
    tmp_path: Path, mode: str
) -> None:
    logs = []
    for name, ops in (("with", CountingOps()), ("without", CountingOps(reserving=False))):
        b = backend(tmp_path / name, mode, fileops=ops)
        logs.append(await _live(b, 4))
        assert await b.read_raw("s1") == logs[-1].read_bytes()
        await b.release_writer("s1")
        await b.aclose()
    assert logs[0].read_bytes() == logs[1].read_bytes()


async def test_a_one_off_write_reserves_nothing(tmp_path: Path) -> None:
    ops = CountingOps()
    b = backend(tmp_path, "none", fileops=ops)
    m = meta()
    await b.append_batch(m, turn(0), is_materialized=False)
    await b.append_batch(m, turn(TURN, turn_no=2), is_materialized=True)  # no writer held
    await b.acquire_writer("s1")
    await b.append_batch(m, turn(2 * TURN, turn_no=3), is_materialized=True)  # its first append
    await b.release_writer("s1")
    assert ops.reserves == []
    assert ops.truncates == 0
    await b.aclose()


@pytest.mark.parametrize("code", [errno.EOPNOTSUPP, errno.ENOSPC])
async def test_a_failed_reservation_is_silent_and_not_retried_within_the_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    calls: list[int] = []

    def failing(fd: int, mode: int, offset: int, length: int) -> int:
        calls.append(offset)
        ctypes.set_errno(code)
        return -1

    monkeypatch.setattr(reserve_module, "_FALLOCATE", failing)
    ops = CountingOps()
    b = backend(tmp_path, "none", fileops=ops)
    path = await _live(b, 5)
    assert len(calls) == 1
    size = os.stat(path).st_size
    await b.release_writer("s1")
    assert ops.truncates == 0  # nothing was reserved, so nothing to free
    assert os.stat(path).st_size == size
    reread = backend(tmp_path, "none")
    stored = await reread.load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 6 * TURN
    await b.aclose()
    await reread.aclose()


@pytest.mark.usefixtures("supported")
@pytest.mark.parametrize("mode", MODES)
async def test_blocks_left_reserved_by_a_crash_change_nothing(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await _live(b, 2)
    before = path.read_bytes()
    # A writer that crashed holding its reservation leaves the log like this.
    fd = os.open(path, os.O_WRONLY)
    try:
        assert keep_size_fallocate(fd, len(before), RESERVE_BYTES)
    finally:
        os.close(fd)
    await b.aclose()
    assert path.read_bytes() == before
    again = backend(tmp_path, mode)
    stored = await again.load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 3 * TURN
    await again.acquire_writer("s1")
    await again.append_batch(meta(), turn(3 * TURN, turn_no=4), is_materialized=True)
    await again.append_batch(meta(), turn(4 * TURN, turn_no=5), is_materialized=True)
    await again.release_writer("s1")
    stored = await again.load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 5 * TURN
    assert path.read_bytes().startswith(before)
    assert _allocated(path) < os.stat(path).st_size + RESERVE_BYTES // 2
    await again.aclose()


@pytest.mark.usefixtures("supported")
async def test_release_leaves_a_log_that_changed_under_it_alone(tmp_path: Path) -> None:
    ops = CountingOps()
    b = backend(tmp_path, "none", fileops=ops)
    path = await _live(b, 2)
    with path.open("ab") as foreign:  # not this writer's bytes: never cut them
        foreign.write(b"written by someone else\n")
    size = os.stat(path).st_size
    await b.release_writer("s1")
    assert ops.truncates == 0
    assert os.stat(path).st_size == size
    await b.aclose()


def _tmpfs_dir() -> str | None:
    """A tmpfs mount point to write in, if there is one."""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, kind, *_ = line.split()
            if kind == "tmpfs" and os.access(point, os.W_OK) and point in ("/dev/shm", "/tmp"):
                return point
    return None


def test_a_log_in_memory_reserves_nothing(tmp_path: Path) -> None:
    if not os.path.exists("/proc/mounts") or (point := _tmpfs_dir()) is None:
        pytest.skip("no writable tmpfs mount here")
    probe = Path(point) / f"dsh-reserve-probe-{os.getpid()}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        assert not keep_size_fallocate(fd, 0, RESERVE_BYTES)
        assert os.fstat(fd).st_blocks == 0
    finally:
        os.close(fd)
        probe.unlink()
