"""P1 and P6 run (figures are measured by `python -m benchmarks`, never asserted)."""

from __future__ import annotations

import pytest

from benchmarks import p1_checkpoint, p6_growth

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """The benchmarks' own loop is asyncio (`anyio.run` default); one run is enough."""
    return "asyncio"


async def test_p1_checkpoint_runs() -> None:
    warmup = p1_checkpoint.CALIBRATION_ROUNDS
    found, shares, batch_bytes = await p1_checkpoint.measure(rounds=2, warmup=warmup)
    assert {n: [len(s.samples) for s in series] for n, series in found.items()} == {
        n: [2, 2, 2, 2, 2] for n in p1_checkpoint.SIZES
    }
    assert set(shares) == set(p1_checkpoint.SIZES)
    # Every size's batch is ~2 KB once the warm-up has calibrated it (the spec's workload).
    target = p1_checkpoint.TARGET_BYTES
    for n, sizes in batch_bytes.items():
        assert len(sizes) == 2
        assert all(abs(size - target) <= target // 50 for size in sizes), (n, sizes)


async def test_p6_growth_runs() -> None:
    found = await p6_growth.measure(rounds=2, warmup=1)
    assert [len(s.samples) for s in found] == [2, 2, 2]
