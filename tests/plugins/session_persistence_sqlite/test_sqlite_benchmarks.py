"""The SQLite benchmarks run (figures are measured by `python -m benchmarks`, never asserted)."""

from __future__ import annotations

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
