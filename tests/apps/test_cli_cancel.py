"""Ctrl-C and kill -9 while a tool body runs, through the real `dsh`: the cancellation grace, a
second Ctrl-C, the README's kill -9 walkthrough, idempotency keys across a crash, and resumed
replay sessions that never repeat a call id."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
SLOW_OVERLAY = REPO / "config" / "overlays" / "slow-tool.yml"

#: A tool that ignores `exec.signal`: it records its idempotency key (and appends it to the
#: demo ledger, a side effect done before the wait), then sleeps for 30 s.
STUBBORN_TOOL = """\
import json
from pathlib import Path

import anyio

from plugins.demo_tools import Ledger, default_ledger_path
from plugins.tools import Tool

name = "stubborn-tool"
inject = ["tools"]


async def body(args, exec):
    Ledger(default_ledger_path()).append(exec.idempotency_key, "charged")
    Path(args["marker"]).write_text(json.dumps({"key": exec.idempotency_key}))
    await anyio.sleep(30)
    return "woke up"


def apply(ctx, config):
    schema = {"type": "object", "properties": {"marker": {"type": "string"}}}
    ctx.tools.register(Tool("stubborn", "Ignores cancellation for 30 s.", schema, body))
"""


class Stderr:
    """Collects a child's stderr in a thread, so a test can wait for a line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        self._stream = process.stderr
        self._lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for line in self._stream:
            self._lines.append(line)

    def wait_for(self, text: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self._lines):
            assert time.monotonic() < deadline, f"{text!r} never appeared in {self.text()!r}"
            time.sleep(0.02)

    def text(self) -> str:
        self._thread.join(0.5)
        return "".join(self._lines)


def _wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, "dsh run exited early"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _events(dsh: Sandbox, session_id: str) -> list[dict[str, Any]]:
    shown = dsh("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def _call_ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["callId"] for e in events if e["type"] == "tool/call"]


def _stubborn_run(
    dsh: Sandbox, replay_overlay: Callable[..., Path], session_id: str, grace_ms: float | None
) -> tuple[subprocess.Popen[str], Path, Path]:
    dsh.write("stubborn_tool.py", STUBBORN_TOOL)
    marker = dsh.root / f"{session_id}.marker"
    overlay = replay_overlay(
        f"{session_id}.yml",
        f"""\
      - tool_calls:
          - id: call-slow
            name: stubborn
            arguments: {{marker: "{marker}"}}
      - tool_calls:
          - id: call-check
            name: find_ledger_entry
            arguments: {{key: call-slow}}
      - text: Checked.
""",
    )
    with overlay.open("a") as file:
        file.write("- insert:\n    - id: stubborn-tool\n      name: ./stubborn_tool.py\n")
        if grace_ms is not None:
            file.write(f"- id: tools\n  config: {{cancel_grace_ms: {grace_ms}}}\n")
    process = dsh.start(
        "run",
        "--patch",
        overlay,
        "--session",
        session_id,
        "go",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return process, marker, overlay


def _cut_short(events: list[dict[str, Any]]) -> dict[str, Any]:
    (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
    return result


def test_ctrl_c_during_a_stubborn_tool_ends_after_the_default_grace(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    process, marker, _ = _stubborn_run(dsh, replay_overlay, "s-grace", None)
    try:
        stderr = Stderr(process)
        _wait_for(marker, process)
        interrupted_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
        elapsed = time.monotonic() - interrupted_at
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # The body ignored the abort: it was cut short once the 2 s grace had passed.
    assert 1.9 <= elapsed < 10, elapsed
    assert "interrupted: cancelling the turn" in stderr.text()
    events = _events(dsh, "s-grace")
    result = _cut_short(events)
    assert result["error"] == {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}
    text = result["message"]["content"][0]["content"][0]["text"]
    assert "effects may have happened; verify before retrying" in text
    assert events[-1]["data"] == {
        "turn": 1,
        "reason": {"kind": "aborted", "reason": {"kind": "user"}},
    }


def test_a_second_ctrl_c_skips_the_grace(dsh: Sandbox, replay_overlay: Callable[..., Path]) -> None:
    process, marker, _ = _stubborn_run(dsh, replay_overlay, "s-twice", 60_000)
    try:
        stderr = Stderr(process)
        _wait_for(marker, process)
        process.send_signal(signal.SIGINT)
        stderr.wait_for("interrupted: cancelling the turn")
        time.sleep(0.3)
        assert process.poll() is None  # still in its 60 s grace
        second_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
        elapsed = time.monotonic() - second_at
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert elapsed < 8, elapsed
    assert "stopping running tools now" in stderr.text()
    result = _cut_short(_events(dsh, "s-twice"))
    assert result["error"] == {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"}


def test_the_key_of_a_call_is_the_same_after_sigkill_and_resume(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    process, marker, overlay = _stubborn_run(dsh, replay_overlay, "s-key", None)
    try:
        _wait_for(marker, process)
        time.sleep(0.2)  # the marker's JSON is complete
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    key_before = json.loads(marker.read_text())["key"]

    resumed = dsh("resume", "s-key")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.startswith("recovered: 1 tool call with unknown outcome")
    # The model checks the interrupted call by its id: a new process derives the same key.
    continued = dsh("resume", "s-key", "continue", "--patch", overlay)
    assert continued.returncode == 0, continued.stderr
    events = _events(dsh, "s-key")
    assert _call_ids(events) == ["call-slow", "call-check"]
    check = [e["data"] for e in events if e["type"] == "tool/result"][-1]
    found = json.loads(check["message"]["content"][0]["content"][0]["text"])
    assert found["key"] == key_before
    assert found["entry"] == "charged"


def test_the_readme_kill_9_walkthrough(dsh: Sandbox) -> None:
    """README: kill a run while a tool runs, `dsh show`, `dsh resume ID`, `resume ID "continue"`."""
    process = dsh.start(
        "run",
        "--patch",
        SLOW_OVERLAY,
        "--session",
        "demo",
        "Write slow.txt slowly",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        stderr = Stderr(process)
        stderr.wait_for("→ sleep_then_write")
        time.sleep(1)  # the call's checkpoint is on disk well within the 30 s wait
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()

    shown = dsh("show", "demo")
    assert shown.returncode == 0, shown.stderr
    assert "sleep_then_write: outcome UNKNOWN (crash repair)" in shown.stdout
    assert "[pending repair]" in shown.stdout

    resumed = dsh("resume", "demo")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == (
        "recovered: 1 tool call with unknown outcome, turn 1 closed as interrupted"
    )

    continued = dsh("resume", "demo", "continue", "--patch", SLOW_OVERLAY)
    assert continued.returncode == 0, continued.stderr
    assert continued.stdout.startswith("I read slow.txt to see whether the slow write happened")
    assert not (dsh.workspace / "slow.txt").exists()
    events = _events(dsh, "demo")
    assert _call_ids(events) == ["call-slow-write", "call-check-slow"]
    failed = [e for e in events if e["type"] == "tool/result" and "error" in e["data"]]
    # The repaired call's outcome is unknown; the check finds that slow.txt was never written.
    assert [e["data"]["error"]["code"] for e in failed] == ["TOOL_OUTCOME_UNKNOWN", "NOT_FOUND"]
    ends = [e["data"]["reason"] for e in events if e["type"] == "turn/end"]
    assert ends == [{"kind": "interrupted"}, {"kind": "completed"}]


def test_resume_continue_on_the_default_app_never_repeats_a_call_id(dsh: Sandbox) -> None:
    first = dsh("run", "--session", "s-cont", "Write a haiku about durable logs into notes.txt")
    assert first.returncode == 0, first.stderr
    continued = dsh("resume", "s-cont", "continue")
    assert continued.returncode == 0, continued.stderr
    assert continued.stdout.startswith("notes.txt holds the haiku")
    events = _events(dsh, "s-cont")
    assert _call_ids(events) == ["call-write-notes", "call-ledger-notes", "call-read-notes"]
    # Only the first turn appended to the ledger: nothing was re-run.
    ledger = (dsh.home / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 1

    # The script is used up: the model says so instead of replaying an earlier response.
    again = dsh("resume", "s-cont", "continue")
    assert again.returncode == 1
    assert "replay script exhausted: request 5 but only 4 responses are configured" in again.stderr
    assert _call_ids(_events(dsh, "s-cont")) == [
        "call-write-notes",
        "call-ledger-notes",
        "call-read-notes",
    ]


def test_two_sessions_of_the_default_app_both_record_their_change(dsh: Sandbox) -> None:
    """The replay script's call ids are fixed, but each session's ledger key is its own."""
    for session_id in ("s-one", "s-two"):
        run = dsh("run", "--session", session_id, "Write a haiku about durable logs into notes.txt")
        assert run.returncode == 0, run.stderr
        assert '✓ append_ledger: {"status":"appended"' in run.stderr, run.stderr
    records = [json.loads(line) for line in (dsh.home / "ledger.jsonl").read_text().splitlines()]
    assert len({record["key"] for record in records}) == 2
