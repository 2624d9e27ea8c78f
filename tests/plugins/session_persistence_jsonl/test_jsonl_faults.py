"""R5: write and fsync failures roll the file back; a later write persists everything once."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from jsonl_helpers import MODES, backend, meta, turn, write

from plugins.session_persistence_jsonl import FileOps

pytestmark = pytest.mark.anyio


class FaultyOps(FileOps):
    """`failing[call]` is the errno the next call of that kind raises (once); a failing `write`
    first lands half its bytes, like a short write before the disk fills."""

    def __init__(self) -> None:
        self.failing: dict[str, int] = {}
        self.skip: dict[str, int] = {}
        self.calls: list[str] = []

    def _maybe_fail(self, call: str) -> None:
        self.calls.append(call)
        if self.skip.get(call):
            self.skip[call] -= 1
            return
        code = self.failing.pop(call, None)
        if code is not None:
            raise OSError(code, os.strerror(code))

    def write(self, fd: int, data: memoryview) -> int:
        if "write" in self.failing and len(data) > 1:
            os.write(fd, data[: len(data) // 2])  # a short write lands, then the disk fills
        self._maybe_fail("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._maybe_fail("fsync")
        super().fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self._maybe_fail("ftruncate")
        super().ftruncate(fd, length)

    def link(self, source: str, target: str) -> None:
        self._maybe_fail("link")
        super().link(source, target)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("call", "code"), [("write", errno.ENOSPC), ("fsync", errno.EIO)])
@pytest.mark.parametrize("owned", [False, True])
async def test_failed_append_rolls_back_and_a_retry_persists_once(
    tmp_path: Path, mode: str, call: str, code: int, owned: bool
) -> None:
    ops = FaultyOps()
    b = backend(tmp_path, mode, fileops=ops)
    if owned:
        await b.acquire_writer("s1")
    path = await write(b, meta(), [turn(0)])
    before = path.read_bytes()
    ops.failing[call] = code
    with pytest.raises(OSError) as caught:
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert caught.value.errno == code
    assert path.read_bytes() == before
    ops.failing.clear()
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    stored = await backend(tmp_path, mode).load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0) + turn(8, 2)
    assert stored.torn_marker is None
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_rollback_failure_is_an_exception_group(tmp_path: Path, mode: str) -> None:
    ops = FaultyOps()
    b = backend(tmp_path, mode, fileops=ops)
    path = await write(b, meta(), [turn(0)])
    ops.failing.update(write=errno.EIO, ftruncate=errno.EIO)
    with pytest.raises(ExceptionGroup) as caught:
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert str(caught.value).startswith(f'failed to roll back append to "{path}"')
    assert [e.errno for e in caught.value.exceptions] == [errno.EIO, errno.EIO]  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("call", "skip", "code"),
    [
        ("write", 0, errno.ENOSPC),
        ("fsync", 0, errno.EIO),  # fsync of the parent of a new directory
        ("fsync", 3, errno.EIO),  # fsync of the temp file
        ("fsync", 4, errno.EIO),  # fsync of the session directory after the link
        ("link", 0, errno.EIO),
    ],
)
async def test_failed_creation_leaves_no_log_and_can_be_retried(
    tmp_path: Path, mode: str, call: str, skip: int, code: int
) -> None:
    ops = FaultyOps()
    b = backend(tmp_path, mode, fileops=ops)
    ops.failing[call] = code
    ops.skip[call] = skip
    with pytest.raises(OSError) as caught:
        await b.append_batch(meta(), turn(0), is_materialized=False)
    assert caught.value.errno == code
    directory = Path(b.locate(meta()).path).parent
    if directory.exists():
        assert sorted(p.name for p in directory.iterdir()) == ["session.lock"]
    assert await b.load_stored("s1") is None
    ops.failing.clear()
    await b.append_batch(meta(), turn(0), is_materialized=False)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0)


async def test_creation_fsyncs_file_then_directory(tmp_path: Path) -> None:
    ops = FaultyOps()
    b = backend(tmp_path, "none", fileops=ops)
    await b.append_batch(meta(), turn(0), is_materialized=False)
    # root, project and session directories are new: each parent fsynced; then file, link, dir.
    assert ops.calls == ["fsync"] * 3 + ["write", "fsync", "link", "fsync"]
    ops.calls.clear()
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert ops.calls == ["write", "fsync"]
