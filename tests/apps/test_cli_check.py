"""`dsh check`: every problem of a manifest and its overlays as one `file:line:col:` line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox

CONFIG = Path(__file__).parents[2] / "config"

#: (manifest, overlay or None, a fragment of the expected problem, its line)
BAD = {
    "unknown-plugin": ("- id: a\n  name: dsh-no-such-plugin\n", None, "cannot resolve plugin", 2),
    "missing-file-plugin": ("- id: a\n  name: ./nope.py\n", None, "no such file", 2),
    "extra-config-key": (
        "- id: a\n  name: dsh-agent\n  config:\n    bogus: 1\n",
        None,
        "Extra inputs",
        4,
    ),
    "config-type": (
        "- id: a\n  name: dsh-agent\n  config:\n    max_parallel_tool_calls: many\n",
        None,
        "max_parallel_tool_calls",
        4,
    ),
    "unset-variable": (
        "- id: a\n  name: dsh-demo-tools\n  config:\n    workspace: ${DSH_TEST_UNSET_VAR}\n",
        None,
        "DSH_TEST_UNSET_VAR",
        4,
    ),
    "yaml-syntax": ("- id: a\n  name: [dsh-agent\n", None, "failed to parse", 3),
    "not-a-list": ("id: a\nname: dsh-agent\n", None, "", 1),
    "row-not-mapping": ("- just a string\n", None, "", 1),
    "duplicate-id": ("- id: a\n  name: dsh-session\n- id: a\n  name: dsh-tools\n", None, "", 3),
    "unknown-row-field": ("- id: a\n  name: dsh-session\n  colour: red\n", None, "colour", 3),
    "disabled-not-bool": ("- id: a\n  name: dsh-session\n  disabled: maybe\n", None, "disabled", 3),
    "python-tag": ("- id: a\n  name: !!python/name:os.system\n", None, "", 2),
    "overlay-missing-id": (
        "- id: a\n  name: dsh-session\n",
        "- id: b\n  disabled: true\n",
        'no entry with id "b"',
        1,
    ),
    "overlay-unknown-field": (
        "- id: a\n  name: dsh-session\n",
        "- id: a\n  frobnicate: 1\n",
        "frobnicate",
        2,
    ),
}

LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): \S")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_manifest_exits_2_with_file_line(dsh: Sandbox, case: str) -> None:
    manifest, overlay, fragment, line = BAD[case]
    dsh.write("app.yml", manifest)
    args = ["check", "-c", "app.yml"]
    if overlay is not None:
        dsh.write("overlay.yml", overlay)
        args += ["--patch", "overlay.yml"]
    result = dsh(*args)
    assert result.returncode == 2, result.stdout
    problems = result.stdout.splitlines()
    assert problems
    for problem in problems:
        assert LINE.match(problem), problem
    first = LINE.match(problems[0])
    assert first is not None
    assert first["path"] == ("overlay.yml" if overlay is not None else "app.yml")
    assert int(first["line"]) == line
    assert fragment in problems[0]
    assert result.stderr.endswith("problem(s) in app.yml\n")


def test_every_problem_is_reported(dsh: Sandbox) -> None:
    dsh.write(
        "app.yml",
        "- id: a\n  name: dsh-nope\n- id: b\n  name: dsh-agent\n  config:\n    bogus: 1\n",
    )
    result = dsh("check", "-c", "app.yml")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    # The unknown plugin, the bad config, then each service row b needs and no row provides.
    assert [LINE.match(line)["line"] for line in lines] == ["2", "6", "3", "3", "3"]  # type: ignore[index]
    assert lines[1].endswith(
        "invalid config for entry b (app.yml:6): Extra inputs are not permitted (at bogus)"
    )
    assert lines[2].endswith(
        'service "sessions" is not provided by any row; add a row with name: dsh-session'
        " (needed by entry b, app.yml:4)"
    )
    assert result.stderr == "dsh: error: 5 problem(s) in app.yml\n"


@pytest.mark.parametrize(
    "overlays",
    [
        [],
        ["overlays/no-checkpoints.yml"],
        ["overlays/strict-checkpoints.yml"],
        ["overlays/sqlite.yml"],
        ["overlays/postgres.yml"],
        ["examples/replace-policy.yml"],
    ],
)
def test_shipped_manifests_are_clean(dsh: Sandbox, overlays: list[str]) -> None:
    args = ["check", *(a for o in overlays for a in ("--patch", CONFIG / o))]
    result = dsh(*args, env={"DSH_POSTGRES_DSN": "postgresql://unused"})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("ok: ")


def test_missing_manifest(dsh: Sandbox) -> None:
    result = dsh("check", "-c", "absent.yml")
    assert result.returncode == 2
    assert result.stdout.startswith("failed to read config file absent.yml")
