"""The README's picture: `benchmarks/results/checkpoints.png`, drawn from the JSON results.

Left: checkpoint cost against history length (P6 on JSONL, SQLite, PostgreSQL; P9's LangGraph
`SqliteSaver.put` of the same conversation). Right: P10's durable steps per second against the
number of concurrent sessions, ours and LangGraph's. Needs matplotlib (the `bench` extra); run
it alone with `python -m benchmarks.plot`, or let `python -m benchmarks` draw it at the end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.harness import RESULTS

PICTURE = RESULTS / "checkpoints.png"
_PRIOR = re.compile(r"(\d+) prior")


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def growth_series(result: dict[str, Any], match: str) -> tuple[list[int], list[float]]:
    """(history sizes, median ms) of the rows whose case contains `match`."""
    sizes, medians = [], []
    for entry in result["rows"]:
        found = _PRIOR.search(entry["case"])
        if found and match in entry["case"]:
            sizes.append(int(found.group(1)))
            medians.append(entry["median_us"] / 1000.0)
    return sizes, medians


def draw(path: Path = PICTURE) -> Path | None:
    """Write the picture; None (and a note) when matplotlib or every result is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot: matplotlib is not installed (the `bench` extra); no picture drawn")
        return None
    figure, (growth, many) = plt.subplots(1, 2, figsize=(12, 4.5))
    curves = (
        ("p6_growth", "flush", "ours, JSONL"),
        ("p6_sqlite_growth", "sqlite checkpoint", "ours, SQLite"),
        ("p6_postgres_growth", "postgres checkpoint", "ours, PostgreSQL"),
        ("p9_langgraph", "LangChain messages", "LangGraph SqliteSaver.put (LangChain messages)"),
        ("p9_langgraph", "message dicts", "LangGraph SqliteSaver.put (dicts)"),
    )
    for name, match, label in curves:
        result = load(name)
        if result is None:
            continue
        sizes, medians = growth_series(result, match)
        if sizes:
            growth.plot(sizes, medians, marker="o", label=label)
    growth.set(
        xscale="log",
        yscale="log",
        xlabel="prior messages in the session",
        ylabel="median checkpoint latency (ms)",
        title="Checkpoint cost vs history (P6, P9)",
    )
    growth.legend(fontsize=7)
    p10 = load("p10_many_sessions")
    if p10 is not None:
        engines: dict[str, list[tuple[int, float]]] = {}
        for outcome in p10["outcomes"]:
            engines.setdefault(outcome["engine"], []).append(
                (outcome["sessions"], outcome["durable_steps_per_s"])
            )
        for engine, points in sorted(engines.items()):
            points.sort()
            style = "--" if engine.startswith("langgraph") else "-"
            many.plot(*zip(*points, strict=True), style, marker="o", label=engine)
        many.legend(fontsize=7)
    many.set(
        xscale="log",
        xlabel="concurrent sessions",
        ylabel="durable steps per second",
        title="Many sessions at once (P10)",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"plot: wrote {path}")
    return path


if __name__ == "__main__":
    draw()
