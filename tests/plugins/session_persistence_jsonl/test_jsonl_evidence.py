"""R16: a repair never destroys evidence. Damage a crash could produce (an unparsable last record
with no later `turn/end`) still ends the good prefix, but the bytes the repair cuts are kept
beside the log in `<log>.torn-<ms>` (0600), and the load says how many and where."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from jsonl_helpers import backend, meta, turn, write

from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence import SessionPersistenceCorruptionError, SetAside
from plugins.session_persistence.testing import running, texts
from plugins.session_persistence_jsonl import FileOps, frames
from plugins.session_persistence_jsonl.backend import TORN_SUFFIX

pytestmark = pytest.mark.anyio

FIRST, SECOND = turn(0), turn(8, turn_no=2)


def torn_files(log: Path) -> list[Path]:
    return sorted(log.parent.glob(log.name + TORN_SUFFIX + "*"))


def flip_last_turn_end(log: Path) -> bytes:
    """Flip one byte of the closed turn's final `turn/end` line; return that line."""
    data = log.read_bytes()
    start = data.rindex(b"\n", 0, len(data) - 1) + 1
    line = data[start:]
    assert b'"turn/end"' in line
    damaged = bytearray(data)
    damaged[start] ^= 0x20  # `{` becomes `[`: not a record any more
    log.write_bytes(bytes(damaged))
    return bytes(damaged[start:])


def break_last_block_size(log: Path) -> bytes:
    """Give the first block of the last zstd frame a size past the end of the file; return the
    frame's bytes as damaged."""
    data = bytearray(log.read_bytes())
    last = frames.scan(bytes(data))[-1]
    descriptor = data[last.start + 4]
    single_segment = bool(descriptor & 0x20)
    fcs = (0, 2, 4, 8)[descriptor >> 6] or (1 if single_segment else 0)
    at = last.start + 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03] + fcs
    header = data[at] | data[at + 1] << 8 | data[at + 2] << 16
    header = (header & 0x7) | ((header >> 3) + 4096) << 3
    data[at : at + 3] = bytes((header & 0xFF, header >> 8 & 0xFF, header >> 16 & 0xFF))
    log.write_bytes(bytes(data))
    return bytes(data[last.start :])


@pytest.mark.parametrize(
    ("mode", "damage"), [("none", flip_last_turn_end), ("zstd", break_last_block_size)]
)
async def test_a_repair_keeps_what_it_cuts_beside_the_log(
    tmp_path: Path, mode: str, damage: object
) -> None:
    log = await write(backend(tmp_path, mode), meta(), [FIRST, SECOND])
    assert callable(damage)
    cut = damage(log)
    kept_prefix = log.read_bytes()[: -len(cut)]
    async with running(backend(tmp_path, mode)) as w:
        inspected = await w.service.inspect("s1")
        assert inspected.torn_bytes == len(cut)
        assert torn_files(log) == []  # inspect writes nothing
        loaded = await w.service.load("s1")
        (kept,) = torn_files(log)
        assert w.service.set_aside("s1") == (SetAside(str(kept), len(cut)),)
    assert kept.read_bytes() == cut
    assert stat.S_IMODE(os.lstat(kept).st_mode) == 0o600
    assert loaded.set_aside == (SetAside(str(kept), len(cut)),)
    assert loaded.torn_bytes == 0
    prefix = [*FIRST, *SECOND[:-1]] if mode == "none" else FIRST
    assert texts(loaded.events) == texts([*prefix, *interrupted_turn_closers(prefix)])
    assert log.read_bytes().startswith(kept_prefix)
    async with running(backend(tmp_path, mode)) as w:
        again = await w.service.inspect("s1")
    assert again.set_aside == (SetAside(str(kept), len(cut)),)
    assert texts(again.events) == texts(loaded.events)


async def test_the_set_aside_file_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    log = await write(backend(tmp_path, "none"), meta(), [FIRST, SECOND])
    flip_last_turn_end(log)
    old = os.umask(0)
    try:
        async with running(backend(tmp_path, "none")) as w:
            await w.service.load("s1")
    finally:
        os.umask(old)
    (kept,) = torn_files(log)
    assert stat.S_IMODE(os.lstat(kept).st_mode) == 0o600


async def test_a_live_session_adopting_a_torn_log_keeps_the_cut_bytes(tmp_path: Path) -> None:
    log = await write(backend(tmp_path, "none"), meta(), [FIRST, SECOND])
    cut = flip_last_turn_end(log)
    stored = [*FIRST, *SECOND[:-1]]
    async with running(backend(tmp_path, "none")) as w:
        live = w.sessions.create("s1", seed=stored, meta={"cwd": "/home/u/proj", "createdAt": 1000})
        await w.sessions.flush(live)
        (kept,) = torn_files(log)
        assert w.service.set_aside("s1") == (SetAside(str(kept), len(cut)),)
    assert kept.read_bytes() == cut


async def test_damage_before_a_later_turn_end_is_corruption_and_nothing_is_cut(
    tmp_path: Path,
) -> None:
    log = await write(backend(tmp_path, "none"), meta(), [FIRST, SECOND])
    data = bytearray(log.read_bytes())
    data[data.index(b"\n") + 1] ^= 0x20  # the first event line, before two turn/ends
    log.write_bytes(bytes(data))
    async with running(backend(tmp_path, "none")) as w:
        with pytest.raises(
            SessionPersistenceCorruptionError, match=r"unparsable committed event at line 1$"
        ):
            await w.service.load("s1")
    assert log.read_bytes() == bytes(data)
    assert torn_files(log) == []


class _FullDisk(FileOps):
    """Fails writing the set-aside file as a full disk would."""

    def write(self, fd: int, data: memoryview) -> int:
        if (
            os.readlink(f"/proc/self/fd/{fd}")
            .rpartition("/")[2]
            .startswith("session.jsonl" + TORN_SUFFIX)
        ):
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(fd, data)


async def test_when_the_cut_bytes_cannot_be_kept_the_log_is_not_cut(tmp_path: Path) -> None:
    log = await write(backend(tmp_path, "none"), meta(), [FIRST, SECOND])
    flip_last_turn_end(log)
    damaged = log.read_bytes()
    async with running(backend(tmp_path, "none", fileops=_FullDisk())) as w:
        with pytest.raises(OSError, match="No space left on device"):
            await w.service.load("s1")
    assert log.read_bytes() == damaged
    assert torn_files(log) == []
