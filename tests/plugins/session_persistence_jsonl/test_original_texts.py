"""Broken JSONL logs are refused with the original harness's texts, byte for byte, one test per
case (docs/legacy-logs.md), and the documented differences from the original hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard
from jsonl_helpers import MODES, backend, meta, turn, write

import plugins.session as session_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import Frame, scan

pytestmark = pytest.mark.anyio

HEADER = b'{"type":"session","version":0,"id":"s1","createdAt":1000,"cwd":"/home/u/proj"}'


def frame(plaintext: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(plaintext)


def place(tmp_path: Path, mode: str, content: bytes) -> tuple[JsonlBackend, Path]:
    """`content` as the log of session "s1" (cwd /home/u/proj) under a `mode` backend."""
    b = backend(tmp_path, mode)
    path = Path(b.locate(meta()).path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return b, path


async def refusal(b: JsonlBackend, session_id: str = "s1") -> str:
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await b.load_stored(session_id)
    return str(caught.value)


async def three_frames(tmp_path: Path) -> tuple[JsonlBackend, Path, bytes, list[Frame]]:
    """A zstd log of a header frame and three batch frames."""
    b = backend(tmp_path, "zstd")
    path = await write(b, meta(), [turn(0), turn(8, 2), turn(16, 3)])
    data = path.read_bytes()
    return b, path, data, scan(data)


async def listed_problem(b: JsonlBackend) -> str:
    """The text of the listing's one problem row: a listing goes on past a refused entry and
    marks it with the same text (docs/storage-safety.md)."""
    rows = [header for header in await b.list() if "problem" in header]
    assert len(rows) == 1
    return str(rows[0]["problem"])


# -- raw and zstd headers -----------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", HEADER, b'{"type":"session"'])
async def test_empty_or_header_less_raw_log(tmp_path: Path, content: bytes) -> None:
    b, _ = place(tmp_path, "none", content)
    assert await refusal(b) == "empty or header-less session log"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("line", [b"{oops", b"", b"\xff\xfe{}", b"NaN"])
async def test_header_line_not_json(tmp_path: Path, mode: str, line: bytes) -> None:
    content = frame(line + b"\n") if mode == "zstd" else line + b"\n"
    b, _ = place(tmp_path, mode, content)
    assert await refusal(b) == "corrupt session log: header line is not valid JSON"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "line",
    [
        b"[]",
        b'"session"',
        b'{"type":"event","version":0,"id":"s1","createdAt":1}',
        b'{"version":0,"id":"s1","createdAt":1}',
        b'{"type":"session","id":"s1","createdAt":1}',
        b'{"type":"session","version":"0","id":"s1","createdAt":1}',
        b'{"type":"session","version":0.5,"id":"s1","createdAt":1}',
        b'{"type":"session","version":0,"createdAt":1}',
        b'{"type":"session","version":0,"id":7,"createdAt":1}',
        b'{"type":"session","version":0,"id":"s1"}',
        b'{"type":"session","version":0,"id":"s1","createdAt":-1}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1.5}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":-1}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"seedLength":"2"}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"origin":"user"}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":5}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"parentSession":null}',
        b'{"type":"session","version":0,"id":"s1","createdAt":1,"agentPreset":1}',
        b'{"type":"session","version":0,"id":"s1","sandboxMode":"x"}',
    ],
)
async def test_header_that_is_not_a_session_header(tmp_path: Path, mode: str, line: bytes) -> None:
    content = frame(line + b"\n") if mode == "zstd" else line + b"\n"
    b, _ = place(tmp_path, mode, content)
    assert await refusal(b) == "corrupt session log: first line is not a session header"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field", [b'"sandboxMode":"workspace-write"', b'"approvalPolicy":null'])
async def test_header_with_retired_policy_fields(tmp_path: Path, mode: str, field: bytes) -> None:
    line = HEADER[:-1] + b"," + field + b"}\n"
    b, _ = place(tmp_path, mode, frame(line) if mode == "zstd" else line)
    assert await refusal(b) == "session header uses retired policy baseline fields"


@pytest.mark.parametrize("mode", MODES)
async def test_header_id_differs_from_the_requested_id(tmp_path: Path, mode: str) -> None:
    line = HEADER.replace(b'"id":"s1"', b'"id":"other"') + b"\n"
    b, path = place(tmp_path, mode, frame(line) if mode == "zstd" else line)
    assert await refusal(b) == (
        f'corrupt session log {dumps(str(path))}: requested id "s1" does not match header id '
        '"other"'
    )


@pytest.mark.parametrize("mode", MODES)
async def test_header_id_and_cwd_name_another_place(tmp_path: Path, mode: str) -> None:
    line = HEADER.replace(b'"/home/u/proj"', b'"/elsewhere"') + b"\n"
    b, path = place(tmp_path, mode, frame(line) if mode == "zstd" else line)
    expected = b.root / "--elsewhere--" / "s1" / path.name
    text = (
        f'corrupt session log {dumps(str(path))}: header id "s1" and cwd identify '
        f"{dumps(str(expected))}"
    )
    assert await refusal(b) == text
    assert await listed_problem(b) == text


async def test_header_id_that_cannot_name_a_path(tmp_path: Path) -> None:
    b, path = place(tmp_path, "none", HEADER.replace(b'"id":"s1"', b'"id":""') + b"\n")
    assert await listed_problem(b) == (
        f"corrupt session log {dumps(str(path))}: header id cannot name a storage path"
    )


async def test_paths_are_json_strings(tmp_path: Path) -> None:
    root = tmp_path / 'a "quoted" dir'
    line = HEADER.replace(b'"id":"s1"', b'"id":"other"') + b"\n"
    b, path = place(root, "none", line)
    assert await refusal(b) == (
        f'corrupt session log {dumps(str(path))}: requested id "s1" does not match header id '
        '"other"'
    )
    assert '\\"quoted\\"' in dumps(str(path))


# -- zstd frames ---------------------------------------------------------------------------------


def first_block(data: bytes, start: int) -> int:
    """The offset of the first block header of the frame at `start`."""
    descriptor = data[start + 4]
    single = bool(descriptor & 0x20)
    content_size = (0, 2, 4, 8)[descriptor >> 6] or (1 if single else 0)
    return start + 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 0x03] + content_size


@pytest.mark.parametrize("content", [b"", frame(HEADER + b"\n")[:-1], frame(HEADER + b"\n")[:6]])
async def test_zstd_empty_or_without_a_header_frame(tmp_path: Path, content: bytes) -> None:
    b, _ = place(tmp_path, "zstd", content)
    assert await refusal(b) == "empty or header-less Zstandard session log"


@pytest.mark.parametrize(
    "first", [HEADER + b"\n" + b'{"type":"turn/start"}\n', HEADER, b"", b"\n" + HEADER + b"\n"]
)
async def test_zstd_first_frame_is_not_one_header_line(tmp_path: Path, first: bytes) -> None:
    b, _ = place(tmp_path, "zstd", frame(first))
    assert await refusal(b) == (
        "corrupt Zstandard session log: first frame is not exactly one header line"
    )


@pytest.mark.parametrize("index", [0, 2])
async def test_zstd_frame_failing_its_checksum(tmp_path: Path, index: int) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    damaged = frames[index]
    last = damaged.end - 1  # the checksum's last byte
    path.write_bytes(data[:last] + bytes([data[last] ^ 0xFF]) + data[last + 1 :])
    assert await refusal(b) == (
        f"corrupt Zstandard session log: frame at byte {damaged.start} failed validation"
    )


async def test_zstd_frame_whose_block_cannot_be_decoded(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    damaged = frames[2]
    block = first_block(data, damaged.start)
    at = (block + 3 + damaged.end - 4) // 2  # inside the block's payload
    path.write_bytes(data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :])
    assert await refusal(b) == (
        f"corrupt Zstandard session log: frame at byte {damaged.start} failed validation"
    )


async def test_zstd_invalid_frame_magic(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    at = frames[2].start
    path.write_bytes(data[:at] + b"\x00" + data[at + 1 :])
    assert await refusal(b) == f"corrupt Zstandard session log: invalid frame magic at byte {at}"


async def test_zstd_reserved_frame_header_bit(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    at = frames[2].start + 4  # the frame header descriptor
    path.write_bytes(data[:at] + bytes([data[at] | 0x08]) + data[at + 1 :])
    assert await refusal(b) == (
        f"corrupt Zstandard session log: reserved frame-header bit at byte {at}"
    )


async def test_zstd_reserved_block_type(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    at = first_block(data, frames[2].start)
    path.write_bytes(data[:at] + bytes([data[at] | 0x06]) + data[at + 1 :])
    assert await refusal(b) == f"corrupt Zstandard session log: reserved block type at byte {at}"


async def test_zstd_complete_frame_holding_a_torn_record(tmp_path: Path) -> None:
    b, path, data, _ = await three_frames(tmp_path)
    path.write_bytes(data + frame(b'{"type":"turn/start","seq":24'))
    assert await refusal(b) == (
        "corrupt Zstandard session log: complete frame contains a torn JSONL record"
    )


# -- layout ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "other"), [("none", "zstd"), ("zstd", "none")])
async def test_both_encodings_for_one_session(tmp_path: Path, mode: str, other: str) -> None:
    path = await write(backend(tmp_path, mode), meta(), [turn(0)])
    await write(backend(tmp_path / "x", other), meta(), [turn(0)])
    foreign = next((tmp_path / "x" / "sessions").rglob("session.jsonl*"))
    (path.parent / foreign.name).write_bytes(foreign.read_bytes())
    suffix = ".jsonl.zstd" if mode == "none" else ".jsonl"
    text = (
        f"session artifact {dumps(str(path.parent / foreign.name))} uses {suffix}, but this "
        f'backend is configured for compression "{mode}"; use a separate root or select the '
        "matching compression mode"
    )
    b = backend(tmp_path, mode)
    with pytest.raises(SessionPersistenceError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == text
    assert await listed_problem(b) == text


@pytest.mark.parametrize("mode", MODES)
async def test_flat_legacy_layout(tmp_path: Path, mode: str) -> None:
    path = await write(backend(tmp_path, mode), meta(), [turn(0)])
    flat = path.parent.parent / f"s2{path.name.removeprefix('session')}"
    flat.write_bytes(path.read_bytes())
    text = (
        f"session artifact {dumps(str(flat))} uses the unsupported flat-file layout; use a "
        "separate root or move it into a project/session directory before loading"
    )
    b = backend(tmp_path, mode)
    with pytest.raises(SessionPersistenceError) as caught:
        await b.load_stored("s2")
    assert str(caught.value) == text
    assert await listed_problem(b) == text


@pytest.mark.parametrize("mode", MODES)
async def test_one_id_in_two_project_folders(tmp_path: Path, mode: str) -> None:
    await write(backend(tmp_path, mode), meta(cwd="/a"), [turn(0)])
    elsewhere = await write(backend(tmp_path / "x", mode), meta(cwd="/b"), [turn(0)])
    elsewhere.parent.parent.rename(tmp_path / "sessions" / "--b--")
    b = backend(tmp_path, mode)
    text = 'duplicate JSONL session id "s1" appears in multiple project directories'
    with pytest.raises(SessionPersistenceError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == text
    assert await listed_problem(b) == text


async def test_the_service_passes_the_texts_on_unchanged(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    at = frames[2].start
    path.write_bytes(data[:at] + b"\x00" + data[at + 1 :])
    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        await ctx.plugin(jsonl_plugin, {"root": str(b.root), "compression": "zstd"})
        for read in (ctx.sessionPersistence.inspect, ctx.sessionPersistence.load):
            with pytest.raises(SessionPersistenceCorruptionError) as caught:
                await read("s1")
            assert str(caught.value) == (
                f"corrupt Zstandard session log: invalid frame magic at byte {at}"
            )


# -- documented differences from the original ----------------------------------------------------


async def test_a_frame_without_content_checksum_is_accepted(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    expected = await b.load_stored("s1")
    plain = zstandard.ZstdDecompressor().decompressobj().decompress(data[frames[3].start :])
    bare = zstandard.ZstdCompressor(write_checksum=False).compress(plain)
    assert not bare[4] & 0x04
    path.write_bytes(data[: frames[3].start] + bare)
    stored = await backend(tmp_path, "zstd").load_stored("s1")
    assert expected is not None
    assert stored is not None
    assert stored.torn_marker is None
    assert stored.events == expected.events


async def test_the_unused_descriptor_bit_is_ignored(tmp_path: Path) -> None:
    b, path, data, frames = await three_frames(tmp_path)
    expected = await b.load_stored("s1")
    at = frames[2].start + 4
    path.write_bytes(data[:at] + bytes([data[at] | 0x10]) + data[at + 1 :])
    stored = await backend(tmp_path, "zstd").load_stored("s1")
    assert expected is not None
    assert stored is not None
    assert stored.events == expected.events


@pytest.mark.parametrize("mode", MODES)
async def test_a_header_without_delegation_depth_reads_as_depth_0(
    tmp_path: Path, mode: str
) -> None:
    b, _ = place(tmp_path, mode, frame(HEADER + b"\n") if mode == "zstd" else HEADER + b"\n")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.meta["delegationDepth"] == 0


async def test_integers_beyond_the_safe_range_keep_their_value(tmp_path: Path) -> None:
    line = b'{"type":"todo/write","seq":0,"time":1,"data":{"n":9007199254740993}}\n'
    b, _ = place(tmp_path, "none", HEADER + b"\n" + line)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.events[0]["data"]["n"] == 2**53 + 1
