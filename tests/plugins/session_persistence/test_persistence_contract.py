"""The contract suite over the in-memory test backend: checks the suite itself and
the coordinator behind it (the real backends plug in from their own test packages)."""

from __future__ import annotations

import pytest

from plugins.session_persistence import PersistenceBackend
from plugins.session_persistence.testing.contract import BackendContract, BackendHarness
from plugins.session_persistence.testing.memory import MemoryBackend, MemoryStorage


class MemoryHarness(BackendHarness):
    name = "memory"
    cross_process = False

    def __init__(self) -> None:
        self.storage = MemoryStorage()

    def new_backend(self) -> PersistenceBackend:
        return MemoryBackend(self.storage)

    def child_factory(self) -> tuple[str, dict[str, object]]:
        raise NotImplementedError("in-memory storage is not shared between processes")

    async def tear_tail(self, session_id: str) -> None:
        self.storage.tear(session_id)

    async def corrupt_committed(self, session_id: str) -> None:
        self.storage.corrupt(session_id, 1)

    async def set_format_version(self, session_id: str, version: int) -> None:
        self.storage.set_version(session_id, version)


class TestMemoryContract(BackendContract):
    @pytest.fixture
    def harness(self) -> BackendHarness:
        return MemoryHarness()
