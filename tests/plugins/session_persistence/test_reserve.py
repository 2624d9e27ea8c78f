"""`keep_size_fallocate` (docs/persistence.md, "Blocks reserved past a live JSONL log's end"):
it reserves blocks past the end without changing a byte, and not when the file system is
nearly full, where reserved blocks could take the space another file's append needs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from plugins.session_persistence.reserve import HEADROOM, keep_size_fallocate

LENGTH = 1 << 20


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    """A small file on a file system that can reserve (skips where it cannot)."""
    path = tmp_path / "log"
    path.write_bytes(b"x" * 100)
    handle = os.open(path, os.O_RDWR)
    probe = os.open(tmp_path / "probe", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not keep_size_fallocate(probe, 0, LENGTH):
            pytest.skip("fallocate(FALLOC_FL_KEEP_SIZE) is not available here")
    finally:
        os.close(probe)
    yield handle
    os.close(handle)


def _free(monkeypatch: pytest.MonkeyPatch, available: int) -> None:
    monkeypatch.setattr(os, "fstatvfs", lambda fd: SimpleNamespace(f_bavail=available, f_frsize=1))


def test_reserves_past_the_end_without_changing_size_or_bytes(fd: int) -> None:
    before = os.fstat(fd)
    assert keep_size_fallocate(fd, before.st_size, LENGTH)
    after = os.fstat(fd)
    assert after.st_size == before.st_size == 100
    assert after.st_blocks * 512 >= LENGTH
    assert os.pread(fd, 200, 0) == b"x" * 100


def test_a_nearly_full_file_system_reserves_nothing(
    fd: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = os.fstat(fd).st_blocks
    _free(monkeypatch, HEADROOM * LENGTH - 1)
    assert not keep_size_fallocate(fd, 100, LENGTH)
    assert os.fstat(fd).st_blocks == blocks


def test_enough_headroom_reserves(fd: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _free(monkeypatch, HEADROOM * LENGTH)
    assert keep_size_fallocate(fd, 100, LENGTH)
    assert os.fstat(fd).st_blocks * 512 >= LENGTH
