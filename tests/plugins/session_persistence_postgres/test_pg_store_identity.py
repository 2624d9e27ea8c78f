"""The store identity of a PostgreSQL schema: one random id, the same for every instance."""

from __future__ import annotations

import pytest
from pg_helpers import backend
from postgres_support import PostgresTarget, fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_every_instance_over_a_schema_reads_one_identity(postgres: PostgresTarget) -> None:
    first, again = backend(postgres), backend(postgres)
    try:
        identity = await first.store_identity()
        assert await again.store_identity() == identity
    finally:
        await first.aclose()
        await again.aclose()
    with fresh_schema() as schema:
        other = backend(PostgresTarget(postgres.dsn, schema))
        try:
            assert await other.store_identity() != identity
        finally:
            await other.aclose()
