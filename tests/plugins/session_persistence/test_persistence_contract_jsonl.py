"""The contract suite (spec 02 §9) over the real JSONL backend in raw mode, child processes
included: the coordinator's rules against real files and real cross-process locks."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.session_persistence import PersistenceBackend
from plugins.session_persistence.testing import BackendContract, BackendHarness
from plugins.session_persistence_jsonl import JsonlBackend, segment


class JsonlRawHarness(BackendHarness):
    name = "jsonl-raw"

    def __init__(self, root: Path) -> None:
        self.root = root

    def new_backend(self) -> PersistenceBackend:
        return JsonlBackend(self.root, compression="none")

    def child_factory(self) -> tuple[str, dict[str, object]]:
        return "plugins.session_persistence_jsonl:JsonlBackend", {
            "root": str(self.root),
            "compression": "none",
        }

    def _log(self, session_id: str) -> Path:
        (path,) = self.root.glob(f"*/{segment(session_id)}/session.jsonl")
        return path

    async def tear_tail(self, session_id: str) -> None:
        path = self._log(session_id)
        data = path.read_bytes()
        last = data[:-1].rsplit(b"\n", 1)[1]
        path.write_bytes(data[: len(data) - len(last) // 2])

    async def corrupt_committed(self, session_id: str) -> None:
        path = self._log(session_id)
        header, first, rest = path.read_bytes().split(b"\n", 2)
        path.write_bytes(header + b"\n" + b"#" + first[1:] + b"\n" + rest)

    async def set_format_version(self, session_id: str, version: int) -> None:
        path = self._log(session_id)
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"version":0', f'"version":{version}'.encode(), 1))


class TestJsonlRawContract(BackendContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> BackendHarness:
        return JsonlRawHarness(tmp_path / "sessions")
