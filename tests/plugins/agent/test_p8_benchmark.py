"""The P8 benchmark runs (figures come from `python -m benchmarks p8_turn`, never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import p8_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The benchmark's own loop is asyncio (`anyio.run` default); one run is enough."""
    return "asyncio"


async def test_p8_turn_runs(tmp_path: Path) -> None:
    cases = await p8_turn.measure(str(tmp_path), rounds=3, warmup=1)
    kinds = ["without policy"] + (["with policy"] if p8_turn.load_policy() else [])
    expected = [f"{kind}, {mode}" for mode, _ in p8_turn.MODES for kind in kinds]
    assert [case.series.name for case in cases] == expected
    assert all(len(case.series.samples) == len(case.fsyncs) == 3 for case in cases)
    assert all(min(case.fsyncs) >= 1 for case in cases)  # at least the idle checkpoint
