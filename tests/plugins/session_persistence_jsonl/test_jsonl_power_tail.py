"""Power-cut tails: bytes after the last complete frame that are not a frame are a torn tail."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from jsonl_helpers import MODES, backend, meta, open_turn, turn, write

from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence_jsonl.frames import FrameError, scan

pytestmark = pytest.mark.anyio

BATCHES = [turn(0), turn(8, 2), open_turn(16, 3)]
EVENTS = [e for batch in BATCHES for e in batch]


async def repaired(tmp_path: Path, mode: str) -> list[dict[str, object]]:
    """Load the log, commit its repair, load again: the events a reader sees afterwards."""
    b = backend(tmp_path, mode)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.torn_marker is not None
    closers = interrupted_turn_closers(stored.events)
    await b.commit_repair(stored.meta, stored.torn_marker, closers)
    again = await backend(tmp_path, mode).load_stored("s1")
    assert again is not None
    assert again.torn_marker is None
    assert again.events == [*stored.events, *closers]
    return stored.events


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("zeros", [1, 3, 4, 5, 150, 4096])
async def test_a_zero_filled_tail_is_torn_and_repaired(
    tmp_path: Path, mode: str, zeros: int
) -> None:
    path = await write(backend(tmp_path, mode), meta(), BATCHES)
    path.write_bytes(path.read_bytes() + b"\x00" * zeros)
    assert await repaired(tmp_path, mode) == EVENTS


@pytest.mark.parametrize("mode", MODES)
async def test_a_last_batch_whose_blocks_were_zeroed_is_torn(tmp_path: Path, mode: str) -> None:
    """The size reached the disk, the data did not: the whole last batch reads as zeros, or only
    its end does (the checksum then fails in a structurally complete frame)."""
    path = await write(backend(tmp_path, mode), meta(), BATCHES)
    data = path.read_bytes()
    last = scan(data)[-1].start if mode == "zstd" else data.rindex(b"\n", 0, len(data) - 1) + 1
    for kept in (0, 6, 10, (len(data) - last) // 2, len(data) - last - 2):
        image = data[: last + kept] + b"\x00" * (len(data) - last - kept)
        path.write_bytes(image)
        events = await repaired(tmp_path, mode)
        assert events == EVENTS[: len(events)]
        assert len(events) >= len(BATCHES[0]) + len(BATCHES[1])


async def test_garbage_before_a_later_complete_frame_stays_corruption(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), BATCHES)
    data = path.read_bytes()
    frames = scan(data)
    damaged = data[: frames[2].start] + b"\x00" * 4 + data[frames[2].start + 4 :]
    path.write_bytes(damaged)
    with pytest.raises(SessionPersistenceCorruptionError, match=r"invalid frame magic at byte \d+"):
        await backend(tmp_path, "zstd").load_stored("s1")
    assert path.read_bytes() == damaged
    with pytest.raises(FrameError):
        scan(damaged)


async def test_a_checksum_failure_before_a_later_frame_stays_corruption(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), BATCHES)
    data = bytearray(path.read_bytes())
    frames = scan(bytes(data))
    data[frames[2].end - 1] ^= 0xFF  # frame 3's checksum; frame 4 follows
    path.write_bytes(bytes(data))
    with pytest.raises(
        SessionPersistenceCorruptionError, match=r"frame at byte \d+ failed validation"
    ):
        await backend(tmp_path, "zstd").load_stored("s1")


def test_only_a_frame_start_counts_as_a_later_frame() -> None:
    """Garbage holding the magic number, but no frame that verifies, is still a tail."""
    c = zstandard.ZstdCompressor(write_checksum=True)
    header = c.compress(b'{"type":"session"}\n')
    good = c.compress(b"line\n")
    tail = b"\x00\x00" + good[:4] + b"\x01\x02\x03" + b"\x00" * 40
    found = scan(header + good + tail)
    assert [f.complete for f in found] == [True, True, False]
    assert found[-1].start == len(header + good)
