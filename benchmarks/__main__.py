"""Run benchmarks by name: `python -m benchmarks p1 p7` (no names: all of them), then redraw the
README's picture from the results (`benchmarks.plot`)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def available() -> list[str]:
    """Benchmark modules are `benchmarks/<name>.py` files exposing `main()` (not the harness, the
    plot, or `p11_floor`, a script P11 runs as a child)."""
    here = Path(__file__).resolve().parent
    skip = {"harness", "__main__", "plot", "p11_floor"}
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name not in skip)


def main(argv: list[str]) -> int:
    names = argv or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available())}")
        return 2
    for name in names:
        importlib.import_module(f"benchmarks.{name}").main()
    from benchmarks.plot import draw

    draw()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
