"""The persistence contract suite (docs/persistence.md) over PostgreSQL, one fresh schema per test.

Behaviour 13 runs a real child process with its own connections (the suite's `hold` child
builds `PostgresBackend` from `child_factory`). Damage for behaviours 7 and 8 is done with SQL
on the rows: the last write never committed (a crash inside it), unparsable `data` before a
`turn/end` (committed corruption), and the header's `version` column.
"""

from __future__ import annotations

import pytest
from pg_helpers import execute, plant_version
from postgres_support import PostgresTarget

from plugins.session_persistence import PersistenceBackend
from plugins.session_persistence.testing.contract import BackendContract, BackendHarness
from plugins.session_persistence_postgres import PostgresBackend

pytestmark = pytest.mark.postgres


class PostgresHarness(BackendHarness):
    name = "postgres"

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target

    def new_backend(self) -> PersistenceBackend:
        return PostgresBackend(self.target.dsn, schema=self.target.schema)

    def child_factory(self) -> tuple[str, dict[str, object]]:
        kwargs: dict[str, object] = {"dsn": self.target.dsn, "schema": self.target.schema}
        return "plugins.session_persistence_postgres:PostgresBackend", kwargs

    async def tear_tail(self, session_id: str) -> None:
        """The last write never committed: its row is gone and `next_seq` stands before it."""
        execute(
            self.target,
            "DELETE FROM dsh_events WHERE session_id = %s AND seq = (SELECT max(seq) "
            "FROM dsh_events WHERE session_id = %s)",
            session_id,
            session_id,
        )
        execute(
            self.target,
            "UPDATE dsh_sessions SET next_seq = next_seq - 1, revision = revision + 1 "
            "WHERE id = %s",
            session_id,
        )

    async def corrupt_committed(self, session_id: str) -> None:
        execute(
            self.target,
            "UPDATE dsh_events SET data = '{\"turn\"' WHERE session_id = %s AND seq = 1",
            session_id,
        )

    async def set_format_version(self, session_id: str, version: int) -> None:
        plant_version(self.target, session_id, version)


class TestPostgresContract(BackendContract):
    @pytest.fixture
    def harness(self, postgres: PostgresTarget) -> BackendHarness:
        return PostgresHarness(postgres)
