"""R3: a multi-batch log cut at every byte loads as its last complete prefix (then repairs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from jsonl_helpers import MODES, backend, chunk, event, meta, open_turn, turn, write

from plugins.session.jsonutil import dumps, loads
from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence.packing import decode_record
from plugins.session_persistence_jsonl.frames import scan
from plugins.session_persistence_jsonl.reader import TornMarker, scan_raw, scan_zstd

pytestmark = pytest.mark.anyio

BATCHES = [
    turn(0),
    open_turn(8, turn_no=2, deltas=5)[:4],
    [
        chunk(12, "x"),
        chunk(13, "y"),
        event(
            14, "tool/call", {"turn": 2, "step": 1, "callId": "c", "name": "t", "arguments": "{}"}
        ),
    ],
    [chunk(15, "é\n"), event(16, "step/end", {"turn": 2, "step": 1})],
]
EVENTS = [e for batch in BATCHES for e in batch]


def raw_prefixes(data: bytes) -> list[tuple[int, int]]:
    """(end offset, events so far) after each complete line of a raw log, header first."""
    out = []
    offset = data.index(b"\n") + 1
    count = 0
    out.append((offset, 0))
    for line in data[offset:].split(b"\n")[:-1]:
        offset += len(line) + 1
        count += len(decode_record(loads(line)))
        out.append((offset, count))
    return out


async def test_every_raw_cut_is_its_complete_line_prefix(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "none"), meta(), BATCHES)
    data = path.read_bytes()
    prefixes = raw_prefixes(data)
    assert prefixes[-1] == (len(data), len(EVENTS))
    header_end = prefixes[0][0]
    for cut in range(header_end, len(data) + 1):
        end, count = max(p for p in prefixes if p[0] <= cut)
        result = scan_raw(data[:cut])
        assert [dumps(e) for e in result.events] == [dumps(e) for e in EVENTS[:count]], cut
        if cut == end:
            assert result.marker is None
        else:
            assert result.marker == TornMarker(end, [], cut)


async def test_every_zstd_cut_is_complete_frames_plus_best_effort(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), BATCHES)
    data = path.read_bytes()
    frames = scan(data)
    assert len(frames) == 1 + len(BATCHES)
    committed = [0]
    for batch in BATCHES:
        committed.append(committed[-1] + len(batch))
    for cut in range(frames[0].end, len(data) + 1):
        index = max(i for i, f in enumerate(frames) if f.start <= cut) if cut < len(data) else 0
        result = scan_zstd(data[:cut])
        if cut == len(data) or cut == frames[index].start:
            done = len(BATCHES) if cut == len(data) else index - 1
            assert result.events == EVENTS[: committed[done]], cut
            assert result.marker is None, cut
            continue
        # Inside frame `index` (batch index-1): all earlier batches, then a best-effort prefix of
        # this batch's events, never a wrong one; the tail is cut back to the frame's start.
        before = committed[index - 1]
        assert result.events[:before] == EVENTS[:before], cut
        assert result.events == EVENTS[: len(result.events)], cut
        assert len(result.events) <= committed[index]
        assert result.marker == TornMarker(frames[index].start, result.events[before:], cut)


@pytest.mark.parametrize("mode", MODES)
async def test_cut_logs_repair_to_prefix_plus_closers_and_go_on(tmp_path: Path, mode: str) -> None:
    writer = backend(tmp_path / "w", mode)
    full = (await write(writer, meta(), BATCHES)).read_bytes()
    cuts = sorted({len(full) - 1, len(full) - 7, *range(len(full) // 2, len(full), 37)})
    for cut in cuts:
        b = backend(tmp_path / f"c{cut}", mode)
        path = await write(b, meta(), [turn(0)])
        path.write_bytes(full[:cut])
        stored = await backend(tmp_path / f"c{cut}", mode).load_stored("s1")
        assert stored is not None
        assert stored.torn_marker is not None
        assert stored.events == EVENTS[: len(stored.events)]
        closers = interrupted_turn_closers(stored.events)
        assert bool(closers) == (len(stored.events) > len(BATCHES[0]))
        b = backend(tmp_path / f"c{cut}", mode)
        again = await b.load_stored("s1")
        assert again is not None
        await b.commit_repair(again.meta, again.torn_marker, closers)
        repaired = await b.load_stored("s1")
        assert repaired is not None
        assert repaired.torn_marker is None
        assert repaired.events == [*stored.events, *closers]
        assert interrupted_turn_closers(repaired.events) == []
        nxt = len(repaired.events)
        await b.append_batch(meta(), turn(nxt, turn_no=3), is_materialized=True)
        final = await backend(tmp_path / f"c{cut}", mode).load_stored("s1")
        assert final is not None
        assert final.events == [*repaired.events, *turn(nxt, turn_no=3)]
        assert final.torn_marker is None


async def test_zstd_torn_frame_recovers_its_complete_lines(tmp_path: Path) -> None:
    b = backend(tmp_path, "zstd")
    path = await write(b, meta(), BATCHES[:1])
    body = b"".join(dumps(e).encode() + b"\n" for e in open_turn(8, turn_no=2))
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(body)
    data = path.read_bytes()
    path.write_bytes(data + frame[:-4])  # everything but the checksum
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == BATCHES[0] + open_turn(8, turn_no=2)
    assert stored.torn_marker == TornMarker(
        len(data), open_turn(8, turn_no=2), len(data) + len(frame) - 4
    )
    await b.commit_repair(stored.meta, stored.torn_marker, [])
    again = await b.load_stored("s1")
    assert again is not None
    assert again.events == stored.events
    assert again.torn_marker is None


@pytest.mark.parametrize("mode", MODES)
async def test_bad_line_without_later_turn_end_is_a_torn_tail(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path / "r", "none")
    path = await write(b, meta(), [turn(0)])
    good = path.read_bytes()
    tail = b"{garbage\n" + dumps(event(8, "turn/start", {"turn": 2})).encode() + b"\n"
    path.write_bytes(good + tail)
    if mode == "zstd":
        b = backend(tmp_path / "z", "zstd")
        path = await write(b, meta(), [turn(0)])
        good = path.read_bytes()
        path.write_bytes(good + zstandard.ZstdCompressor(write_checksum=True).compress(tail))
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0)
    assert stored.torn_marker == TornMarker(
        len(good), [], len(good) + (len(path.read_bytes()) - len(good))
    )
    await b.commit_repair(stored.meta, stored.torn_marker, [])
    assert path.read_bytes() == good
