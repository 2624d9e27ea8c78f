"""PostgreSQL backend tests: asyncio only, one fresh schema per test."""

from __future__ import annotations

import pytest
from postgres_support import postgres_fixture


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: psycopg's async API (AsyncConnection, AsyncConnectionPool) runs on asyncio,
    and the backend refuses trio (one test, `test_trio_is_refused_*`, checks that on trio)."""
    return "asyncio"


postgres = postgres_fixture()
