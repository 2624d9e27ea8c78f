"""R4: damage before a later turn/end is committed corruption, named by line; never truncated."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from jsonl_helpers import MODES, backend, chunk, event, meta, turn, write

from plugins.session.jsonutil import dumps
from plugins.session_persistence.backend import StoredLog
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import scan

pytestmark = pytest.mark.anyio


def body(*records: dict[str, object]) -> bytes:
    return b"".join(dumps(r).encode() + b"\n" for r in records)


async def install(tmp_path: Path, mode: str, lines: bytes) -> tuple[Path, bytes]:
    """A log whose event lines are `lines` (one zstd frame in zstd mode)."""
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    if mode == "zstd":
        first = scan(path.read_bytes())[0]
        data = path.read_bytes()[: first.end] + zstandard.ZstdCompressor(
            write_checksum=True
        ).compress(lines)
    else:
        data = path.read_bytes().split(b"\n", 1)[0] + b"\n" + lines
    path.write_bytes(data)
    return path, data


async def outcome(b: JsonlBackend) -> StoredLog | SessionPersistenceCorruptionError:
    """What loading `s1` gives: the stored log or the corruption error."""
    try:
        stored = await b.load_stored("s1")
    except SessionPersistenceCorruptionError as error:
        return error
    assert stored is not None
    return stored


END = event(3, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
START = event(0, "turn/start", {"turn": 1})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param(
            body(START) + b'{"type":"step/start","seq":1,\n' + body(event(2, "x/y", {}), END),
            "corrupt session log: unparsable committed event at line 2",
            id="unparsable",
        ),
        pytest.param(
            body(START) + b"\xff\xfe\n" + body(END),
            "corrupt session log: unparsable committed event at line 2",
            id="invalid-utf8",
        ),
        pytest.param(
            body(START) + b"[1,2]\n" + body(END),
            "corrupt session log: unparsable committed event at line 2",
            id="not-an-object",
        ),
        pytest.param(
            body(START, event(2, "step/start", {}), END),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)",
            id="seq-gap",
        ),
        pytest.param(
            body(START, {"type": "x", "time": 1, "data": {}}, END),
            "corrupt session log: seq gap in committed region at line 2 "
            "(expected 1, got undefined)",
            id="no-seq",
        ),
        pytest.param(
            body(START, {**END, "seq": 5}),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 5)",
            id="gap-on-the-turn-end-itself",
        ),
        pytest.param(
            body(START)
            + body(
                {
                    "type": "text-chunks",
                    "seq0": 2,
                    "time0": 1,
                    "data": {"turn": 1, "step": 1, "index": 0, "dt": [0], "texts": ["a", "b"]},
                },
                END,
            ),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)",
            id="packed-row-gap",
        ),
        pytest.param(
            body(START) + body({"type": "text-chunks", "seq0": 1, "time0": 1, "data": {}}, END),
            "corrupt session log: unparsable committed event at line 2",
            id="malformed-packed-row",
        ),
        pytest.param(
            b"{\n" + body(START, END),
            "corrupt session log: unparsable committed event at line 1",
            id="first-line",
        ),
    ],
)
async def test_committed_damage_is_refused_and_left_alone(
    tmp_path: Path, mode: str, lines: bytes, message: str
) -> None:
    path, data = await install(tmp_path, mode, lines)
    b = backend(tmp_path, mode)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == message
    assert path.read_bytes() == data
    with pytest.raises(SessionPersistenceCorruptionError):
        await b.load_stored("s1")  # still identifiable by every later read


@pytest.mark.parametrize("mode", MODES)
async def test_a_packed_row_gap_rolls_back_the_whole_row(tmp_path: Path, mode: str) -> None:
    row = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]},
    }
    await install(tmp_path, mode, body(START, row, event(9, "x/y", {})))
    stored = await backend(tmp_path, mode).load_stored("s1")
    assert stored is not None
    assert len(stored.events) == 4
    assert stored.torn_marker is not None


async def test_every_flipped_byte_of_a_committed_raw_line(tmp_path: Path) -> None:
    """A flip that breaks a line before a later turn/end raises; one that keeps it valid JSON
    changes at most that event (a JSONL log carries no checksum); never a silent truncation."""
    path = await write(backend(tmp_path, "none"), meta(), [turn(0), turn(8, 2)])
    data = path.read_bytes()
    start = data.index(b"\n") + 1
    end = data.index(b"\n", start) + 1  # line 1: turn/start of turn 1
    expected = turn(0) + turn(8, 2)
    for offset in range(start, end - 1):
        damaged = bytearray(data)
        damaged[offset] ^= 0x01
        path.write_bytes(bytes(damaged))
        stored = await outcome(backend(tmp_path, "none"))
        if isinstance(stored, SessionPersistenceCorruptionError):
            assert "at line 1" in str(stored)
        else:
            assert stored.events[1:] == expected[1:]
            assert stored.torn_marker is None
        assert path.read_bytes() == bytes(damaged)


async def test_every_flipped_byte_of_a_committed_zstd_frame(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), [turn(0), turn(8, 2), turn(16, 3)])
    data = path.read_bytes()
    frames = scan(data)
    expected = turn(0) + turn(8, 2) + turn(16, 3)
    refused = 0
    for offset in range(frames[1].start, frames[2].end):
        damaged = bytearray(data)
        damaged[offset] ^= 0x10
        path.write_bytes(bytes(damaged))
        stored = await outcome(backend(tmp_path, "zstd"))
        if isinstance(stored, SessionPersistenceCorruptionError):
            assert str(stored).startswith("corrupt Zstandard session log: ")
            refused += 1
        else:
            assert stored.events == expected  # only bits zstd ignores (e.g. window size)
    assert refused > (frames[2].end - frames[1].start) * 0.9


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d, f: d[: f.start] + b"\x00" + d[f.start + 1 :], "invalid frame magic at byte"),
        (
            lambda d, f: d[: f.start + 4] + bytes([d[f.start + 4] | 0x08]) + d[f.start + 5 :],
            "reserved frame-header bit at byte",
        ),
    ],
)
async def test_zstd_structure_damage_is_corruption(
    tmp_path: Path, damage: object, message: str
) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), [turn(0), turn(8, 2)])
    data = path.read_bytes()
    frame = scan(data)[1]
    path.write_bytes(damage(data, frame))  # type: ignore[operator]
    with pytest.raises(SessionPersistenceCorruptionError, match=message):
        await backend(tmp_path, "zstd").load_stored("s1")


async def test_zstd_complete_frame_must_end_on_a_line(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), [turn(0)])
    c = zstandard.ZstdCompressor(write_checksum=True)
    path.write_bytes(path.read_bytes() + c.compress(b'{"type":"tu') + c.compress(b'rn/x"}\n'))
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await backend(tmp_path, "zstd").load_stored("s1")
    assert str(caught.value) == (
        "corrupt Zstandard session log: complete frame contains a torn JSONL record"
    )


async def test_zstd_header_frame_rules(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "zstd"), meta(), [turn(0)])
    data = path.read_bytes()
    first = scan(data)[0]
    path.write_bytes(data[: first.end - 1])
    with pytest.raises(SessionPersistenceCorruptionError, match="empty or header-less Zstandard"):
        await backend(tmp_path, "zstd").load_stored("s1")
    header = zstandard.ZstdDecompressor().decompress(data[: first.end])
    both = zstandard.ZstdCompressor(write_checksum=True).compress(header + body(chunk(0, "a")))
    path.write_bytes(both)
    with pytest.raises(SessionPersistenceCorruptionError, match="first frame is not exactly one"):
        await backend(tmp_path, "zstd").load_stored("s1")
