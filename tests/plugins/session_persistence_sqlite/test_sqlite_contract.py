"""The persistence contract suite (docs/persistence.md) over the SQLite backend."""

from __future__ import annotations

from pathlib import Path

import anyio.to_thread
import pytest
from sqlite_helpers import connect, db_path

from plugins.session_persistence.testing.contract import BackendContract, BackendHarness
from plugins.session_persistence_sqlite import SqliteBackend


class SqliteHarness(BackendHarness):
    """One database file; damage is done with SQL on its rows."""

    name = "sqlite"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = db_path(root)

    def new_backend(self) -> SqliteBackend:
        return SqliteBackend(self.path)

    def child_factory(self) -> tuple[str, dict[str, object]]:
        return "plugins.session_persistence_sqlite:SqliteBackend", {"path": str(self.path)}

    async def _execute(self, sql: str, *args: object) -> None:
        def run() -> None:
            with connect(self.root) as db:
                db.execute(sql, args)

        await anyio.to_thread.run_sync(run)

    async def tear_tail(self, session_id: str) -> None:
        """The last write never committed: its row is gone and `next_seq` stands before it."""
        await self._execute(
            "DELETE FROM events WHERE session_id = ?1"
            " AND seq = (SELECT max(seq) FROM events WHERE session_id = ?1)",
            session_id,
        )
        await self._execute(
            "UPDATE sessions SET next_seq = next_seq - 1, revision = revision + 1 WHERE id = ?",
            session_id,
        )

    async def corrupt_committed(self, session_id: str) -> None:
        """The second row (before the first turn/end) no longer holds JSON."""
        await self._execute(
            "UPDATE events SET data = '{broken' WHERE session_id = ? AND seq = 1", session_id
        )

    async def set_format_version(self, session_id: str, version: int) -> None:
        await self._execute("UPDATE sessions SET version = ? WHERE id = ?", version, session_id)


class TestSqliteContract(BackendContract):
    @pytest.fixture
    def harness(self, tmp_path: Path) -> SqliteHarness:
        return SqliteHarness(tmp_path)
