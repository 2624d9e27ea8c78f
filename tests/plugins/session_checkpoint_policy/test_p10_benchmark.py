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
    outcomes = await p10_many_sessions.measure((3,), peers=False, rounds=2)
    engines = {o.engine for o in outcomes}
    assert {"jsonl", "sqlite"} <= engines
    assert sorted(o.round for o in outcomes if o.engine == "sqlite") == [0, 1]
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


def outcome(engine: str, sessions: int, index: int, seconds: float) -> p10_many_sessions.Outcome:
    return p10_many_sessions.Outcome(engine, sessions, seconds, 100, 10, 2, [1.0], index)


def test_rows_and_ratios_are_medians_of_the_rounds() -> None:
    # Ours at 100, 50, 80 steps/s; LangGraph at 10, 20, 10: the rounds' ratios 10, 2.5, 8.
    found = [
        outcome("sqlite", 7, 0, 1.0),
        outcome("langgraph-sqlite", 7, 0, 10.0),
        outcome("langgraph-sqlite", 7, 1, 5.0),
        outcome("sqlite", 7, 1, 2.0),
        outcome("sqlite", 7, 2, 1.25),
        outcome("langgraph-sqlite", 7, 2, 10.0),
    ]
    rows, ratios, per_round = p10_many_sessions.summarize(found)
    by_engine = {row["engine"]: row for row in rows}
    assert by_engine["sqlite"]["durable_steps_per_s"] == 80.0
    assert by_engine["sqlite"]["round_steps_per_s"] == [100.0, 50.0, 80.0]
    assert by_engine["langgraph-sqlite"]["durable_steps_per_s"] == 10.0
    # The median of the paired ratios (8), not the ratio of the medians (80 / 10).
    assert per_round == {"sqlite/langgraph-sqlite@7": [10.0, 2.5, 8.0]}
    assert ratios == {"sqlite/langgraph-sqlite@7": 8.0}


async def test_ours_and_the_peer_swap_places_every_other_round() -> None:
    order: list[str] = []

    async def ours() -> p10_many_sessions.Outcome:
        order.append("ours")
        return outcome("sqlite", 1, 0, 1.0)

    async def peer() -> p10_many_sessions.Outcome:
        order.append("peer")
        return outcome("langgraph-sqlite", 1, 0, 1.0)

    first = await p10_many_sessions.side_by_side(ours, peer, peer_first=False)
    second = await p10_many_sessions.side_by_side(ours, peer, peer_first=True)
    assert order == ["ours", "peer", "peer", "ours"]
    assert [o.engine for o in first + second] == ["sqlite", "langgraph-sqlite"] * 2
