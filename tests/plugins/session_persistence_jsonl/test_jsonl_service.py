"""The JSONL backend behind `ctx.sessionPersistence`: format refusals, repair, corruption."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import zstandard
from jsonl_helpers import MODES, backend, meta, open_turn, turn, write

import plugins.session
import plugins.session_persistence_jsonl as jsonl
from framework import Context
from plugins.session_persistence.errors import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def mounted(tmp_path: Path, mode: str) -> AsyncIterator[Any]:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": str(tmp_path / "sessions"), "compression": mode})
        yield ctx.sessionPersistence


def rewrite_header(path: Path, mode: str, header: bytes) -> None:
    """Replace a log's header line (zstd: its first frame), keeping the rest."""
    data = path.read_bytes()
    if mode == "zstd":
        from plugins.session_persistence_jsonl.frames import scan

        first = scan(data)[0]
        frame = zstandard.ZstdCompressor(write_checksum=True).compress(header + b"\n")
        path.write_bytes(frame + data[first.end :])
    else:
        path.write_bytes(header + b"\n" + data.split(b"\n", 1)[1])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("version", "text"),
    [
        (
            1,
            'session "s1" uses log format v1, but this harness reads only v0: the log was '
            "written by a newer harness — upgrade the harness to open it",
        ),
        (
            -1,
            'session "s1" uses log format v-1, older than the supported v0, and this build '
            "ships no upgrade path for it",
        ),
    ],
)
async def test_version_refusals_name_the_raw_log(
    tmp_path: Path, mode: str, version: int, text: str
) -> None:
    path = await write(backend(tmp_path, mode), meta(), [turn(0)])
    header = f'{{"type":"session","version":{version},"id":"s1","cwd":"/home/u/proj","x":{{}}}}'
    rewrite_header(path, mode, header.encode())
    before = path.read_bytes()
    async with mounted(tmp_path, mode) as persistence:
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            await persistence.load("s1")
    assert str(caught.value) == f"{text} (raw log: {path})"
    assert path.read_bytes() == before


@pytest.mark.parametrize("mode", MODES)
async def test_torn_open_turn_loads_repaired_and_commits(tmp_path: Path, mode: str) -> None:
    path = await write(backend(tmp_path, mode), meta(), [turn(0), open_turn(8, 2)])
    tail = b'{"type":"step/end","seq":14,"time":0,"data":{"turn":2,"step":1}}\n'
    if mode == "zstd":
        tail = zstandard.ZstdCompressor(write_checksum=True).compress(tail)
    path.write_bytes(path.read_bytes() + tail[: len(tail) // 2])
    async with mounted(tmp_path, mode) as persistence:
        log = await persistence.load("s1")
    kinds = [e["type"] for e in log.events]
    assert kinds[-2:] == ["step/end", "turn/end"]
    assert log.events[-1]["data"]["reason"] == {"kind": "interrupted"}
    stored = await backend(tmp_path, mode).load_stored("s1")
    assert stored is not None
    assert stored.torn_marker is None
    assert stored.events == log.events


@pytest.mark.parametrize("mode", MODES)
async def test_committed_corruption_surfaces_untouched(tmp_path: Path, mode: str) -> None:
    path = await write(backend(tmp_path, "none"), meta(), [turn(0), turn(8, 2)])
    lines = path.read_bytes().split(b"\n")
    lines[3] = b"{broken"
    damaged = b"\n".join(lines)
    if mode == "zstd":
        c = zstandard.ZstdCompressor(write_checksum=True)
        head, body = damaged.split(b"\n", 1)
        damaged = c.compress(head + b"\n") + c.compress(body)
        path.unlink()
        path = path.with_name("session.jsonl.zstd")
    path.write_bytes(damaged)
    async with mounted(tmp_path, mode) as persistence:
        with pytest.raises(SessionPersistenceCorruptionError) as caught:
            await persistence.load("s1")
    assert str(caught.value) == "corrupt session log: unparsable committed event at line 3"
    assert path.read_bytes() == damaged
