"""Crash, lock and Ctrl-C behaviour of `dsh run` / `dsh resume` on real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from dsh_sandbox import Sandbox

#: A plugin file mounted by relative path: a tool that writes a marker, then sleeps.
SLOW_TOOL = """\
import os
from pathlib import Path

import anyio

from plugins.tools import Tool

name = "slow-tool"
inject = ["tools"]


async def body(args, exec):
    Path(args["marker"]).write_text(str(os.getpid()))
    await anyio.sleep(60)
    return "woke up"


def apply(ctx, config):
    schema = {"type": "object", "properties": {"marker": {"type": "string"}}}
    ctx.tools.register(Tool("slow", "Sleeps for a minute.", schema, body))
"""


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, "dsh run exited early"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _events(dsh: Sandbox, session_id: str) -> list[dict[str, object]]:
    shown = dsh("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def test_lock_then_sigkill_then_resume(dsh: Sandbox, replay_overlay: Callable[..., Path]) -> None:
    dsh.write("slow_tool.py", SLOW_TOOL)
    marker = dsh.root / "started.marker"
    slow = replay_overlay(
        "slow.yml",
        f"""\
      - tool_calls:
          - id: call-slow
            name: slow
            arguments: {{marker: "{marker}"}}
          - id: call-next
            name: list_files
            arguments: {{}}
      - text: never reached
""",
    )
    with slow.open("a") as overlay:
        overlay.write("- insert:\n    - id: slow-tool\n      name: ./slow_tool.py\n")
    first = dsh.start(
        "run",
        "--patch",
        slow,
        "--session",
        "s-crash",
        "go",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(marker, first)
        before = dsh.files()

        # A second writer fails at once, naming the owner, and changes nothing on disk.
        second = dsh("run", "--patch", slow, "--session", "s-crash", "again")
        assert second.returncode == 1
        assert second.stderr.startswith(
            f'dsh: error: session "s-crash" is locked by another writer (pid {first.pid} on host '
        )
        assert len(second.stderr.splitlines()) == 1
        assert dsh.files() == before
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()

    # show inspects without writing: the repair is displayed as pending.
    shown = dsh("show", "s-crash")
    assert "slow: outcome UNKNOWN (crash repair)" in shown.stdout
    assert "list_files: not started (crash repair)" in shown.stdout
    assert "[pending repair]" in shown.stdout
    assert "■ turn 1 INTERRUPTED" in shown.stdout
    assert dsh.files() == before

    resumed = dsh("resume", "s-crash")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == (
        "recovered: 1 tool call with unknown outcome, 1 tool call not started, "
        "turn 1 closed as interrupted"
    )
    assert "session s-crash: 1 turn, last: interrupted" in resumed.stdout
    again = dsh("resume", "s-crash")
    assert again.stdout.splitlines()[:2] == [
        "nothing to recover",
        "earlier repairs: 1 tool call with unknown outcome, 1 tool call not started, "
        "turn 1 closed as interrupted",
    ]

    as_json = json.loads(dsh("resume", "s-crash", "--json").stdout)
    assert as_json == {
        "type": "recovered",
        "sessionId": "s-crash",
        "recovered": {
            "unknownOutcome": 0,
            "notStarted": 0,
            "interruptedTurns": [],
            "cancelledApprovals": 0,
        },
        "earlier": {
            "unknownOutcome": 1,
            "notStarted": 1,
            "interruptedTurns": [1],
            "cancelledApprovals": 0,
        },
        "turns": 1,
        "lastReason": {"kind": "interrupted"},
        "events": as_json["events"],
    }

    cont = replay_overlay("cont.yml", "      - text: Checked the ledger; carrying on.\n")
    continued = dsh("resume", "s-crash", "continue", "--patch", cont)
    assert continued.returncode == 0, continued.stderr
    assert continued.stdout == "Checked the ledger; carrying on.\n"
    events = _events(dsh, "s-crash")
    unknown = [
        e
        for e in events
        if e["type"] == "tool/result" and e["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"  # type: ignore[index]
    ]
    assert len(unknown) == 1
    ends = [e["data"] for e in events if e["type"] == "turn/end"]
    assert ends == [
        {"turn": 1, "reason": {"kind": "interrupted"}},
        {"turn": 2, "reason": {"kind": "completed"}},
    ]


def test_sigint_aborts_the_turn_durably(dsh: Sandbox, replay_overlay: Callable[..., Path]) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    overlay = replay_overlay("slowmodel.yml", f"      - text: {words}\n", delay_ms=20)
    process = dsh.start(
        "run",
        "--json",
        "--patch",
        overlay,
        "--session",
        "s-int",
        "talk",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert json.loads(process.stdout.readline()) == {
        "type": "session",
        "sessionId": "s-int",
        "resumed": False,
    }
    first = json.loads(process.stdout.readline())
    assert first["type"] == "text"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    last = json.loads(out.splitlines()[-1])
    aborted = {"kind": "aborted", "reason": {"kind": "user"}}
    assert last["type"] == "result"
    assert last["reason"] == aborted
    # Durable: the stored log ends with the real closing events, nothing left to repair.
    events = _events(dsh, "s-int")
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"] == {"turn": 1, "reason": aborted}
    interrupted = [e for e in events if e["type"] == "assistant/message"]
    assert interrupted[-1]["data"]["interrupted"] is True  # type: ignore[index]
    assert dsh("resume", "s-int").stdout.startswith("nothing to recover\n")
    shown = dsh("show", "s-int").stdout
    assert "(response interrupted)" in shown
    assert "■ turn 1 aborted (user)" in shown
