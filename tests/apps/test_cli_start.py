"""Commands that read stored sessions boot only the session store (docs/performance.md, P11).

Each command runs in a child process that reports, at exit, every module it imported: none of
the model adapters' HTTP clients, the MCP SDK or the run machinery, and no row beyond the store
is applied (a probe row that writes a file when applied stays silent; `dsh tools`, which boots
the whole manifest, applies it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE

import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import make_backend, tool_turn

from apps.cli.commands import PROGRESS_MIN
from apps.cli.errors import FAILED
from plugins.session_persistence.testing import T0

CONFIG = Path(__file__).parents[2] / "config"

#: The console script's body, reporting the imported modules on stderr at exit.
PROBE = """
import atexit, sys

atexit.register(lambda: sys.stderr.write("\\nLOADED " + " ".join(sorted(sys.modules)) + "\\n"))
from apps.cli.main import main

main()
"""

#: What no read-only command needs: HTTP clients, the MCP SDK, running an agent.
UNUSED = ("httpx", "mcp", "plugins.llm_openai", "plugins.mcp.connection", "apps.cli.runner")

PROBE_ROW = """
import os
import pathlib

name = "probe"
inject = ["tools"]


def apply(ctx, config):
    pathlib.Path(os.environ["DSH_PROBE_MARK"]).write_text("applied")
"""


def _python(
    dsh: Sandbox, *argv: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python ARGV...` in the sandbox (its environment plus `env`), output captured."""
    return subprocess.run(
        [sys.executable, *(str(a) for a in argv)],
        cwd=dsh.root,
        env=dsh.env(env),
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _run(dsh: Sandbox, *args: str | Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = _python(dsh, "-c", PROBE, *args, env={"DSH_PROBE_MARK": str(dsh.root / "probe-mark")})
    head, _, loaded = done.stderr.rpartition("\nLOADED ")
    assert loaded, done.stderr
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, head), set(
        loaded.split()
    )


@pytest.fixture
def seeded(dsh: Sandbox) -> Sandbox:
    backend = make_backend("jsonl", dsh)
    backend.seed("first", tool_turn(0, 1, []), str(dsh.root), T0)
    backend.seed("second", tool_turn(0, 1, []), str(dsh.root), T0 + 1)
    return dsh


@pytest.mark.parametrize(
    "args",
    [
        ["sessions"],
        ["sessions", "--json"],
        ["show", "first"],
        ["show", "first", "--messages"],
        ["export", "first", "--jsonl", "-"],
        ["doctor", "first"],
        ["prune", "--older-than", "1d", "--dry-run"],
        ["rm", "second"],
    ],
)
def test_reading_commands_apply_only_the_store(seeded: Sandbox, args: list[str]) -> None:
    overlay = seeded.root / "probe.yml"
    overlay.write_text("- insert:\n    - {id: probe, name: ./probe_row.py}\n", "utf-8")
    (seeded.root / "probe_row.py").write_text(PROBE_ROW, "utf-8")
    done, loaded = _run(seeded, *args, "--patch", overlay)
    assert done.returncode == 0, done.stderr
    assert sorted(loaded.intersection(UNUSED)) == []
    assert not (seeded.root / "probe-mark").exists()
    full, _ = _run(seeded, "tools", "--patch", overlay)
    assert full.returncode == 0, full.stderr
    assert (seeded.root / "probe-mark").read_text() == "applied"


def _rich(loaded: set[str]) -> list[str]:
    return sorted(name for name in loaded if name.split(".")[0] == "rich")


def test_a_listing_on_a_pipe_imports_no_rich(seeded: Sandbox) -> None:
    # its plain columns are written without a console (rich is 7% of the start-up)
    done, loaded = _run(seeded, "sessions")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == [
        *("id", "created", "turns", "last", "turn", "events", "size", "state", "title")
    ]
    assert _rich(loaded) == []
    as_json, loaded = _run(seeded, "sessions", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert _rich(loaded) == []


def test_a_listing_imports_no_agent_module(seeded: Sandbox) -> None:
    # a row's facts need the approval log and the turn fold, not the agent's session opening
    # (`apps.cli.summary` re-exported its repair names; 1% of the start-up)
    done, loaded = _run(seeded, "sessions")
    assert done.returncode == 0, done.stderr
    assert sorted(name for name in loaded if name.startswith("plugins.agent.")) == [
        "plugins.agent.reasons"
    ]


def test_a_long_listing_off_a_terminal_imports_no_rich(dsh: Sandbox) -> None:
    # from PROGRESS_MIN sessions on, a listing asks whether stderr could show a progress bar
    backend = make_backend("jsonl", dsh)
    for index in range(PROGRESS_MIN):
        backend.seed(f"s-{index}", tool_turn(0, 1, []), str(dsh.root), T0 + index)
    done, loaded = _run(dsh, "sessions")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == PROGRESS_MIN + 1
    assert _rich(loaded) == []


@pytest.mark.parametrize("json", [False, True])
def test_a_listing_whose_reader_has_gone_stops_quietly(seeded: Sandbox, json: bool) -> None:
    # the plain columns go to stdout without rich: a closed pipe still ends the command as
    # any closed stdout does (FAILED, nothing on stderr)
    read, write = os.pipe()
    os.close(read)  # `dsh sessions | true`
    try:
        done = seeded.start("sessions", *(["--json"] if json else []), stdout=write, stderr=PIPE)
    finally:
        os.close(write)
    _, err = done.communicate(timeout=60)
    assert (done.returncode, err) == (FAILED, "")


def test_an_mcp_row_is_neither_imported_nor_started_to_list_sessions(seeded: Sandbox) -> None:
    plain, _ = _run(seeded, "sessions")
    with_mcp, loaded = _run(seeded, "sessions", "--patch", CONFIG / "overlays" / "mcp-time.yml")
    assert with_mcp.returncode == 0, with_mcp.stderr
    assert with_mcp.stdout == plain.stdout
    assert "mcp" not in loaded
    assert "plugins.mcp" in loaded  # the row was still resolved (a broken name still fails)


def test_show_tells_the_checkpoint_policy_without_importing_its_barriers(seeded: Sandbox) -> None:
    # `dsh show` asks which policy the manifest mounts (to draw its barriers): the rows are
    # resolved, not validated again, and the barriers' model and tool machinery stays out, as
    # do the run views (rich's live display and tables) and the agent's modules (the repair
    # codes and the arguments' parser live with the session's repair and JSON helpers).
    done, loaded = _run(seeded, "show", "first")
    assert done.returncode == 0, done.stderr
    assert "checkpoint barrier of @deepseek-ai/dsh-session-checkpoint-policy" in done.stdout
    heavy = (
        "apps.cli.views",
        "plugins.agent.opening",
        "plugins.agent.tool_calls",
        "plugins.session_checkpoint_policy.barriers",
        "plugins.tools.service",
        "rich.live",
    )
    assert sorted(loaded.intersection(heavy)) == []


#: The console script's body, reporting at exit how many times the manifest was read and the
#: plugins' entry points scanned.
READS_PROBE = """
import atexit, sys
import framework.loader as loader

reads = []
for name in ("load_manifest", "plugin_entry_points"):
    def counted(*args, _name=name, _real=getattr(loader, name), **kwargs):
        reads.append(_name)
        return _real(*args, **kwargs)
    setattr(loader, name, counted)
atexit.register(lambda: sys.stderr.write("\\nREADS " + " ".join(sorted(reads))))
from apps.cli.main import main

main()
"""


@pytest.mark.parametrize(
    "args", [["show", "first"], ["export", "first", "--html", "page.html"], ["sessions"]]
)
def test_a_reading_command_reads_the_manifest_once(seeded: Sandbox, args: list[str]) -> None:
    # `dsh show` and `export --html` tell the checkpoint policy from the rows the store's boot
    # resolved: a second reading cost 2.5% of `show`'s instructions (docs/performance.md, P11)
    done = _python(seeded, "-c", READS_PROBE, *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr.rpartition("\nREADS ")[2].split() == [
        "load_manifest",
        "plugin_entry_points",
    ]
    if args[0] == "show":
        assert "checkpoint barrier of @deepseek-ai/dsh-session-checkpoint-policy" in done.stdout


#: The console script's body, reporting at exit how many collections ran from its start until the
#: commands were imported, whether the collector is on and whether objects were frozen. `off` first
#: turns the collector off, as a caller may.
GC_PROBE = """
import atexit, gc, sys

def imported():
    return hasattr(sys.modules.get("apps.cli.commands"), "dispatch")

early = []
gc.callbacks.append(lambda phase, info: phase == "start" and not imported() and early.append(1))
frozen = lambda: gc.get_freeze_count() > 0
atexit.register(lambda: sys.stderr.write(f"\\nGC {len(early)} {gc.isenabled()} {frozen()}"))
if sys.argv.pop(1) == "off":
    gc.disable()
from apps.cli.main import main

early.clear()
main()
"""


@pytest.mark.parametrize(("collector", "enabled"), [("on", True), ("off", False)])
def test_the_commands_are_imported_without_collections_and_frozen(
    seeded: Sandbox, collector: str, enabled: bool
) -> None:
    # the commands' modules live as long as the process: importing them paused, then frozen,
    # no collection walks them (10% of a listing's instructions); the collector is left as the
    # caller had it
    done = _python(seeded, "-c", GC_PROBE, collector, "sessions")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[0] == "id"
    assert done.stderr.rpartition("\nGC ")[2].split() == ["0", str(enabled), "True"]


def test_the_main_module_runs_as_a_script(dsh: Sandbox) -> None:
    # `python -m apps.cli.main` stopped on a circular import: the `tools` command's module
    # imported the options of `apps.cli.main`, which the script had not defined yet.
    done = _python(dsh, "-m", "apps.cli.main", "--help", env={"COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert "Usage: dsh [OPTIONS] COMMAND [ARGS]..." in done.stdout
    assert " tools " in done.stdout
