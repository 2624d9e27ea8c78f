"""The persistence contract suite (docs/persistence.md) over the JSONL backend, raw and zstd."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import zstandard

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence.testing.contract import BackendContract, BackendHarness
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import scan


class JsonlHarness(BackendHarness):
    """Raw (`compression="none"`) or zstd logs under one root; damage is done on the file."""

    def __init__(self, root: Path, compression: str) -> None:
        self.root = root
        self.compression = compression
        self.name = "jsonl-raw" if compression == "none" else "jsonl-zstd"

    def new_backend(self) -> JsonlBackend:
        return JsonlBackend(self.root, compression=self.compression)  # type: ignore[arg-type]

    def child_factory(self) -> tuple[str, dict[str, object]]:
        return "plugins.session_persistence_jsonl:JsonlBackend", {
            "root": str(self.root),
            "compression": self.compression,
        }

    async def _plain(self, session_id: str) -> tuple[anyio.Path, list[bytes]]:
        """The log path and its plaintext per write unit (zstd: per frame; raw: one unit)."""
        raw = await self.new_backend().read_raw(session_id)
        path = anyio.Path(self.new_backend()._lookup(session_id) or "")
        if self.compression == "none":
            return path, [raw]
        units = [
            zstandard.ZstdDecompressor().decompressobj().decompress(raw[f.start : f.end])
            for f in scan(raw)
        ]
        return path, units

    async def _store(self, path: anyio.Path, units: list[bytes], torn: bytes = b"") -> None:
        if self.compression == "none":
            await path.write_bytes(b"".join(units) + torn)
            return
        frames = [zstandard.ZstdCompressor(write_checksum=True).compress(u) for u in units]
        if torn:
            frames.append(zstandard.ZstdCompressor(write_checksum=True).compress(torn)[:-4])
        await path.write_bytes(b"".join(frames))

    async def tear_tail(self, session_id: str) -> None:
        path, units = await self._plain(session_id)
        last = units.pop()
        lines = last.split(b"\n")[:-1]
        if self.compression == "none":
            # Keep every earlier line, then half of the last one (no newline).
            head = b"".join(line + b"\n" for line in lines[:-1])
            await self._store(path, [head], lines[-1][: len(lines[-1]) // 2])
            return
        # The last frame is cut before its checksum; its last line is incomplete.
        partial = b"".join(line + b"\n" for line in lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
        await self._store(path, units, partial)

    async def corrupt_committed(self, session_id: str) -> None:
        path, units = await self._plain(session_id)
        first = 1 if self.compression == "zstd" else 0
        header, rest = units[first].split(b"\n", 1) if first == 0 else (None, units[first])
        damaged = b"{broken" + rest[rest.index(b"\n") :]
        units[first] = damaged if header is None else header + b"\n" + damaged
        await self._store(path, units)

    async def set_format_version(self, session_id: str, version: int) -> None:
        path, units = await self._plain(session_id)
        header_line, rest = units[0].split(b"\n", 1)
        header = loads(header_line)
        header["version"] = version
        units[0] = dumps(header).encode() + b"\n" + rest
        await self._store(path, units)


class TestJsonlRawContract(BackendContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> JsonlHarness:
        return JsonlHarness(tmp_path / "sessions", "none")


class TestJsonlZstdContract(BackendContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> JsonlHarness:
        return JsonlHarness(tmp_path / "sessions", "zstd")
