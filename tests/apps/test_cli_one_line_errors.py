"""Without `--debug`, every failure is one line: a plugin failing at start-up, a boot error
with a config problem, a manifest nested 50k deep; the resume hint only for a stored session."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox

CONFIG = Path(__file__).parents[2] / "config"
FAULTS = Path(__file__).parent / "faults"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_plugin_failing_at_start_up_is_one_line(dsh: Sandbox) -> None:
    dsn = f"postgresql://dsh@127.0.0.1:{_closed_port()}/dsh?connect_timeout=5"
    result = dsh(
        "run",
        "--patch",
        CONFIG / "overlays" / "postgres.yml",
        "hi",
        env={"DSH_POSTGRES_DSN": dsn},
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("dsh: error: failed to boot ")
    assert "session-persistence-postgres (dsh-session-persistence-postgres): " in line
    assert "Connection refused" in line
    debug = dsh(
        "run",
        "--debug",
        "--patch",
        CONFIG / "overlays" / "postgres.yml",
        "hi",
        env={"DSH_POSTGRES_DSN": dsn},
    )
    assert "Traceback (most recent call last)" in debug.stderr


def test_a_config_problem_at_boot_reads_as_one_line(dsh: Sandbox) -> None:
    dsh.write(
        "plugin.py",
        "from pydantic import BaseModel\n\nname = 'strict'\n\n"
        "class Config(BaseModel):\n    port: int\n\n"
        "def apply(ctx, config):\n    pass\n",
    )
    # A config `dsh check` cannot see: it comes from the environment at boot.
    dsh.write(
        "overlay.yml",
        "- insert:\n    - id: strict\n      name: ./plugin.py\n"
        "      config: {port: '${DSH_TEST_PORT}'}\n",
    )
    result = dsh("run", "--patch", "overlay.yml", "hi", env={"DSH_TEST_PORT": "eighty"})
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert ":;" not in line
    assert line.endswith(
        "strict (./plugin.py): invalid config for entry strict (overlay.yml:4): Input should be "
        "a valid integer, unable to parse string as an integer (at port)"
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("  config: {x: " + "[" * 50_000 + "]" * 50_000 + "}\n", "3:112"),
        ("  config:\n" + "".join("  " * (i + 2) + "k:\n" for i in range(2_000)), "102:201"),
    ],
    ids=["flow", "block"],
)
def test_a_manifest_nested_50k_deep_is_one_manifest_error(
    dsh: Sandbox, body: str, where: str
) -> None:
    dsh.write("deep.yml", "- id: a\n  name: dsh-session\n" + body)
    for command in (("check", "-c", "deep.yml"), ("run", "-c", "deep.yml", "hi")):
        result = dsh(*command)
        assert result.returncode == 2, command
        assert "RecursionError" not in result.stdout + result.stderr
        assert "nest deeper than 100 levels" in result.stdout + result.stderr
    run = dsh("run", "-c", "deep.yml", "hi")
    (line,) = run.stderr.splitlines()
    assert line == (
        f"dsh: error: failed to parse config file deep.yml: {where}: "
        "lists and mappings nest deeper than 100 levels"
    )


def test_the_resume_hint_only_for_a_stored_session(dsh: Sandbox) -> None:
    shutil.copy(FAULTS / "broken_disk.py", dsh.root / "broken_disk.py")
    dsh.write(
        "broken.yml",
        "- insert:\n    - id: broken-disk\n      name: ./broken_disk.py\n"
        "      config: {after: agent/inbox/spliced, call: write, errno: ENOSPC}\n",
    )
    result = dsh("run", "--patch", "broken.yml", "--session", "s-lost", "hi")
    assert result.returncode == 1
    assert "continue with" not in result.stderr
    assert "session s-lost was not stored" in result.stderr
    assert "session s-lost was not stored" not in dsh("run", "--session", "s-kept", "hi").stderr
