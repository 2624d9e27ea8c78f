"""P12 runs (its figures are measured by `python -m benchmarks`, never asserted here)."""

from __future__ import annotations

from benchmarks import p12_memory


def test_p12_measures_idle_sessions_and_a_load() -> None:
    found = p12_memory.measure(sessions=3, events=20, shapes=(("small", 200 * 1024, 1024),))
    assert found["idle_events"] == [20]
    assert found["idle_rss_mb"] > 0
    (load,) = found["loads"]
    assert load["log_mb"] * p12_memory.MB >= 200 * 1024
    assert load["log_events"] > 0
    assert load["process_peak_mb"] > 0
