"""The SQLite benchmarks run (figures are measured by `python -m benchmarks`, never asserted)."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

from benchmarks import p6_sqlite_growth

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The benchmarks' own loop is asyncio (`anyio.run` default); one run is enough."""
    return "asyncio"


async def test_p6_sqlite_growth_runs() -> None:
    series = await p6_sqlite_growth.measure(rounds=2, warmup=1)
    assert [len(s.samples) for s in series] == [2, 2, 2, 2]  # three sizes and the floor


async def test_p9_langgraph_runs() -> None:
    pytest.importorskip(
        "langgraph.checkpoint.sqlite",
        reason="P9 needs the `bench` extra (pip install -e '.[bench]')",
    )
    from benchmarks import p9_langgraph

    found = await p9_langgraph.measure(rounds=2, warmup=1)
    assert {kind: [len(s.samples) for s in series] for kind, series in found.items()} == {
        kind: [2, 2, 2] for kind in ("ours", "inline", "langchain", "dicts")
    }


async def test_p9_times_every_wal_past_its_first_wrap(tmp_path: Path) -> None:
    """P9's warm-up leaves a WAL at its full size, so the next checkpoint overwrites frames in
    place instead of growing the file (docs/performance.md, "A growing WAL's `fsync`")."""
    pytest.importorskip(
        "langgraph.checkpoint.sqlite",
        reason="P9 needs the `bench` extra (pip install -e '.[bench]')",
    )
    from benchmarks import p9_langgraph

    os.chmod(tmp_path, 0o700)
    async with p6_sqlite_growth.sqlite_stack(tmp_path, "inline-10", 2.0) as ctx:
        case = p6_sqlite_growth.Growth(ctx, 10)
        await case.checkpoint(record=False)
        database = tmp_path / "inline-10.sqlite3"
        assert p9_langgraph.wal_size(database) < p9_langgraph.WRAPPED_WAL_BYTES
        assert await p9_langgraph.past_first_wrap(database, partial(case.checkpoint, record=False))
        full = p9_langgraph.wal_size(database)
        assert full >= p9_langgraph.WRAPPED_WAL_BYTES
        await case.checkpoint(record=False)
        assert p9_langgraph.wal_size(database) == full
        assert (
            await p9_langgraph.past_first_wrap(database, partial(case.checkpoint, record=False))
            == 0
        )
