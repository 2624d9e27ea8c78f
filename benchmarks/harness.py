"""Shared measuring helpers: side-by-side timing, medians, a printed table and a JSON file."""

from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio

T = TypeVar("T")

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Series:
    """Samples (seconds) of one measured case."""

    name: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p90(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


@dataclass
class Row:
    """One line of a benchmark table: a case, its median/p90 and its ratio to a baseline."""

    case: str
    median_us: float
    p90_us: float
    ratio: float | None = None
    note: str = ""


def alternate(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, Series]:
    """Time synchronous cases interleaved round by round, so drift hits them equally."""
    series = {name: Series(name) for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            series[name].samples.append(time.perf_counter() - start)
    return series


async def alternate_async(
    cases: dict[str, Callable[[], Awaitable[object]]], rounds: int
) -> dict[str, Series]:
    """Like `alternate`, for coroutine cases."""
    series = {name: Series(name) for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            await fn()
            series[name].samples.append(time.perf_counter() - start)
    return series


def fsync_floor(directory: str, rounds: int) -> Series:
    """`os.write` + `os.fsync` of ~2 KB appended to one file (the physical floor)."""
    path = os.path.join(directory, "floor.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    payload = b"x" * 2048

    def write_and_sync() -> None:
        os.write(fd, payload)
        os.fsync(fd)

    try:
        return alternate({"write+fsync 2KB": write_and_sync}, rounds)["write+fsync 2KB"]
    finally:
        os.close(fd)


def run_on_disk(
    name: str,
    measure: Callable[[str], Awaitable[T]],
    summarise: Callable[[T, Series], None],
    floor_rounds: int,
) -> None:
    """`measure(directory)` in a fresh temporary folder, then `summarise` its result with the
    `fsync_floor` of that folder's disk; prints the wall time taken."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"dsh-{name}-") as directory:
        found = anyio.run(measure, directory)
        summarise(found, fsync_floor(directory, floor_rounds))
    print(f"({name} took {time.perf_counter() - started:.1f} s)")


def row(series: Series, baseline: Series | None = None, note: str = "") -> Row:
    """Summarise a series (in microseconds), with its median ratio to `baseline`."""
    ratio = series.median / baseline.median if baseline is not None else None
    return Row(series.name, series.median * 1e6, series.p90 * 1e6, ratio, note)


def report(
    name: str, title: str, rows: Sequence[Row], extra: dict[str, object] | None = None
) -> None:
    """Print a table and write `benchmarks/results/<name>.json`."""
    print(f"\n{name}: {title}")
    print(f"{'case':<48} {'median µs':>12} {'p90 µs':>12} {'ratio':>8}  note")
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        print(f"{r.case:<48} {r.median_us:>12.2f} {r.p90_us:>12.2f} {ratio:>8}  {r.note}")
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": name,
        "title": title,
        "machine": machine(),
        "rows": [asdict(r) for r in rows],
        **(extra or {}),
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")


#: Iterations of `cpu_reference`'s loop.
REFERENCE_LOOP = 1_000_000


@functools.cache
def cpu_reference() -> float:
    """Nanoseconds per iteration of a fixed pure-Python loop (the best of five runs).

    The bars in microseconds or milliseconds (P3, P11) depend on how fast the CPU runs Python,
    and shared VMs differ by several times; this figure, written beside every result, lets
    runs on different machines be compared (docs/performance.md, "Reading the figures").
    """
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        total = 0
        for index in range(REFERENCE_LOOP):
            total += index
        best = min(best, time.perf_counter() - start)
    return best / REFERENCE_LOOP * 1e9


def machine() -> dict[str, object]:
    """Describe where the figures came from."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "cpu_reference_ns": round(cpu_reference(), 1),
    }
