"""P11 runs (its figures are measured by `python -m benchmarks`, never asserted here)."""

from __future__ import annotations

from benchmarks import p11_cli_start


def test_p11_times_every_case_once() -> None:
    series = p11_cli_start.measure(rounds=1, warmup=0, sizes=(2,))
    assert list(series) == [
        "python -c pass",
        "dsh sessions · 2 sessions",
        "dsh show ID · 2 sessions",
    ]
    assert all(len(found.samples) == 1 for found in series.values())
