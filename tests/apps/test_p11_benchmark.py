"""P11 runs (its figures are measured by `python -m benchmarks`, never asserted here)."""

from __future__ import annotations

import subprocess
import sys

from benchmarks import p11_cli_start


def test_p11_times_every_case_once() -> None:
    series = p11_cli_start.measure(rounds=1, warmup=0, sizes=(2,))
    assert list(series) == [
        "python -c pass",
        p11_cli_start.FLOOR_CASE,
        "dsh sessions · 2 sessions",
        "dsh show ID · 2 sessions",
    ]
    assert all(len(found.samples) == 1 for found in series.values())


def test_library_floor_imports_no_project_module() -> None:
    """The floor is the libraries' alone: it must not import the framework, plugins or apps."""
    script = str(p11_cli_start.FLOOR_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", script, "sessions"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert {"typer", "pydantic", "anyio", "zstandard"} <= imported
    project = {"framework", "plugins", "apps"}
    ours = sorted(name for name in imported if name.split(".")[0] in project)
    assert ours == []
    assert done.stdout == "no sessions\n"
