"""P12 as a rule: a load through the sessions service (read, upgrade, validate, balance) keeps
no decoded copy of the whole log, so its peak stays within twice the log's size
(docs/event-log.md). Measured in a child process (`VmHWM`), by the P12 benchmark's own code."""

from __future__ import annotations

import pytest

from benchmarks import p12_memory


@pytest.mark.slow
def test_loading_a_chunk_heavy_log_peaks_below_twice_its_size() -> None:
    # The benchmark's own chunk-heavy log (~20 MB; smaller logs are dominated by the process's
    # fixed costs). A load that kept every event decoded at once peaked at 5.8x its size.
    chunk_heavy = next(shape for shape in p12_memory.SHAPES if shape[0] == "chunk-heavy")
    found = p12_memory.measure(sessions=1, events=10, shapes=(chunk_heavy,))
    (load,) = found["loads"]
    assert load["log_mb"] >= 20
    assert load["ratio"] <= 2.0, load
