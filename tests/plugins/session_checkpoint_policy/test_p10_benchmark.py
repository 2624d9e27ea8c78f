"""P10 runs (its figures are measured by `python -m benchmarks`, never asserted here)."""

from __future__ import annotations

import pytest

from benchmarks import p10_many_sessions

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The benchmark's own loop is asyncio (PostgreSQL's driver needs it); one run is enough."""
    return "asyncio"


async def test_p10_runs_ours_on_every_engine() -> None:
    outcomes = await p10_many_sessions.measure((3,), peers=False)
    engines = {o.engine for o in outcomes}
    assert {"jsonl", "sqlite"} <= engines
    for outcome in outcomes:
        assert outcome.steps == 3 * p10_many_sessions.TURNS * 2
        # Every turn passes at least the request and dispatch barriers of its two steps.
        assert outcome.checkpoints >= 3 * p10_many_sessions.TURNS * 3
        assert outcome.commits >= 1
        assert len(outcome.latencies_ms) == outcome.checkpoints


async def test_p10_runs_the_langgraph_peer() -> None:
    pytest.importorskip("langgraph.graph", reason="P10's peer needs the `bench` extra")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory:
        outcome = await p10_many_sessions.langgraph_sqlite(Path(directory) / "lg.sqlite3", 2)
    assert outcome.steps == 2 * p10_many_sessions.TURNS * 2
    assert outcome.checkpoints > 0


def test_the_plot_draws_from_the_results(tmp_path: object) -> None:
    pytest.importorskip("matplotlib", reason="the plot needs the `bench` extra")
    from pathlib import Path

    from benchmarks import plot

    target = Path(str(tmp_path)) / "p.png"
    assert plot.draw(target) == target
    assert target.read_bytes().startswith(b"\x89PNG")
