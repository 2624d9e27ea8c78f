"""The PostgreSQL P6 benchmark runs (figures come from `python -m benchmarks`, never asserted)."""

from __future__ import annotations

import pytest
from postgres_support import PostgresTarget

from benchmarks import p6_postgres_growth

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_p6_postgres_growth_runs(postgres: PostgresTarget) -> None:
    series = await p6_postgres_growth.measure(postgres.schema, rounds=2, warmup=1, dsn=postgres.dsn)
    assert [len(s.samples) for s in series] == [2, 2, 2]
