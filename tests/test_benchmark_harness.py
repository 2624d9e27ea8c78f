"""The benchmark harness writes, beside every result, the machine it came from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import harness


@pytest.fixture
def quick_reference(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(harness, "REFERENCE_LOOP", 1000)
    harness.cpu_reference.cache_clear()
    yield
    harness.cpu_reference.cache_clear()


def test_a_result_records_the_cpu_reference_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick_reference: None
) -> None:
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    series = harness.Series("case", [0.001, 0.002, 0.003])
    harness.report("sample", "a sample", [harness.row(series)])
    written = json.loads((tmp_path / "sample.json").read_text())
    assert written["rows"][0]["median_us"] == pytest.approx(2000.0)
    reference = written["machine"]["cpu_reference_ns"]
    assert isinstance(reference, float)
    assert reference > 0


def test_the_cpu_reference_is_measured_once_per_process(quick_reference: None) -> None:
    first = harness.cpu_reference()
    assert harness.cpu_reference() == first
    assert harness.cpu_reference.cache_info().misses == 1
