"""Every example in `examples/` runs as its own process and prints what its docstring promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str, tmp_path: Path) -> list[str]:
    """Run `examples/<name>` from an unrelated folder; its stdout lines (stderr must be empty)."""
    env = {k: v for k, v in os.environ.items() if k != "DSH_HOME"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_idempotent_tool(tmp_path: Path) -> None:
    lines = run("idempotent_tool.py", tmp_path)
    assert lines[0].startswith('schema: {"description": "Charge the customer for an order')
    assert lines[1:] == [
        'first attempt: {"amount_cents": 4200, "order": "A-17", "status": "charged"}',
        'retry after a crash: {"amount_cents": 4200, "order": "A-17", "status": "duplicate"}',
        "another call: charged",
        'invalid call: Error: invalid arguments: "arguments.amount_cents" must be greater than 0 '
        "(INVALID_ARGS)",
        "ledger: 2 charges",
    ]


def test_library_app(tmp_path: Path) -> None:
    lines = run("library_app.py", tmp_path)
    assert lines[:3] == [
        "session trip, turn 1: completed",
        '  tool forecast({"city": "Lisbon"}) -> {"city":"Lisbon","sky":"sunny","celsius":24}',
        "  answer: It will be sunny in Lisbon, 24 °C.",
    ]
    assert lines[3].startswith("  tokens: ")
    assert lines[4:] == [
        "streaming turn 2: Pack sunglasses. (completed)",
        "stored: 45 events, last turn/end",
    ]


def test_custom_policy(tmp_path: Path) -> None:
    assert run("custom_policy.py", tmp_path) == [
        "without a policy:",
        "  tool body: its tool/call is durable: False",
        "  tool result: sent to ops@example.com",
        "  turn: completed, answer: Sent.",
        "with the policy:",
        "  policy: flushed before send_email",
        "  tool body: its tool/call is durable: True",
        "  tool result: sent to ops@example.com",
        "  turn: completed, answer: Sent.",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_crash_and_resume(tmp_path: Path) -> None:
    assert run("crash_and_resume.py", tmp_path) == [
        "child killed by signal 9 while transfer() was running",
        "repaired TOOL_OUTCOME_UNKNOWN: The tool call was interrupted after it was recorded, but "
        "no result was durably recorded.",
        "turn 1 ended: interrupted",
        "turn 2 ended: completed",
        "the model now says: Its outcome is unknown: I will ask the bank before sending it again.",
    ]
