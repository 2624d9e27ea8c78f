"""SIGKILL of a real `dsh run` while it waits on a pseudo-terminal for an approval answer, on
JSONL, SQLite and PostgreSQL: after recovery the call never runs, the open question is
`cancelled`, the call `TOOL_NOT_STARTED`, and `dsh resume` says so."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from postgres_support import fresh_schema, require_postgres

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and ptys are POSIX-only")

SQLITE = Path(__file__).parents[2] / "config" / "overlays" / "sqlite.yml"
SESSION = "s-approval-kill"


def dsh_path() -> str:
    beside = Path(sys.executable).parent / "dsh"
    found = str(beside) if beside.is_file() else shutil.which("dsh")
    assert found is not None, "the dsh console script is not installed (pip install -e .)"
    return found


class Dsh:
    def __init__(self, root: Path, patches: list[Path]) -> None:
        self.root = root
        self.patches = patches
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
        self.env.update(
            DSH_HOME=str(root / "home"), DSH_WORKSPACE=str(root / "workspace"), NO_COLOR="1"
        )

    def argv(self, *args: str) -> list[str]:
        flags = [flag for patch in self.patches for flag in ("--patch", str(patch))]
        return [dsh_path(), *args, *flags]

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=self.root,
            env=self.env,
            text=True,
            capture_output=True,
            timeout=60,
            check=False,
        )

    def events(self) -> list[dict[str, Any]]:
        shown = self("show", SESSION, "--json")
        assert shown.returncode == 0, shown.stderr
        return [json.loads(line) for line in shown.stdout.splitlines()]


def kill_while_asking(dsh: Dsh) -> None:
    argv = dsh.argv("run", "--session", SESSION, "Write a haiku into notes.txt")
    child = pexpect.spawn(
        argv[0],
        argv[1:],
        cwd=str(dsh.root),
        env={**dsh.env, "TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 200),
    )
    try:
        child.expect("needs your approval")
        child.expect("allow\\? ")
        child.kill(signal.SIGKILL)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.signalstatus == signal.SIGKILL


def check(dsh: Dsh) -> None:
    kill_while_asking(dsh)
    before = dsh.events()  # `show` balances the log in memory only
    asked = [e for e in before if e["type"] == "approval/asked"]
    assert [a["data"]["callId"] for a in asked] == ["call-write-notes"]

    shown = dsh("show", SESSION).stdout
    assert "write_file asks for approval" in shown
    assert "write_file approval: cancelled  [pending repair]" in shown

    resumed = dsh("resume", SESSION)
    assert resumed.returncode == 0, resumed.stderr
    # The response's second call (append_ledger) never started either.
    assert resumed.stdout.splitlines()[0] == (
        "recovered: 1 approval was pending; the call was not run, 1 tool call not started, "
        "turn 1 closed as interrupted"
    )
    log = dsh.events()
    decided = [e["data"] for e in log if e["type"] == "approval/decided"]
    assert decided == [{"id": asked[0]["data"]["id"], "outcome": "cancelled"}]
    results = {
        e["data"]["message"]["source"]["callId"]: e["data"]["error"]["code"]
        for e in log
        if e["type"] == "tool/result"
    }
    assert results == {
        "call-write-notes": "TOOL_NOT_STARTED",
        "call-ledger-notes": "TOOL_NOT_STARTED",
    }
    assert log[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert not (dsh.root / "workspace" / "notes.txt").exists()
    again = dsh("resume", SESSION, "--json")
    recovered = json.loads(again.stdout)
    assert recovered["recovered"]["cancelledApprovals"] == 0
    assert recovered["earlier"]["cancelledApprovals"] == 1
    listed = [json.loads(line) for line in dsh("sessions", "--json").stdout.splitlines()]
    assert [row["waitingApprovals"] for row in listed] == [0]


def test_sigkill_while_asking_on_jsonl(tmp_path: Path) -> None:
    check(Dsh(tmp_path, []))


def test_sigkill_while_asking_on_sqlite(tmp_path: Path) -> None:
    check(Dsh(tmp_path, [SQLITE]))


@pytest.mark.postgres
def test_sigkill_while_asking_on_postgres(tmp_path: Path) -> None:
    dsn = require_postgres()
    with fresh_schema() as schema:
        overlay = tmp_path / "postgres.yml"
        overlay.write_text(
            "- id: session-persistence\n  disabled: true\n- insert:\n"
            "    - id: session-persistence-postgres\n"
            "      name: dsh-session-persistence-postgres\n"
            f"      config: {{dsn: {json.dumps(dsn)}, schema: {schema}}}\n"
        )
        check(Dsh(tmp_path, [overlay]))
