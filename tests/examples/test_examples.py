"""Every example in `examples/` runs as its own process and prints what its docstring promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(script: Path, tmp_path: Path, **env_extra: str) -> list[str]:
    """Run `script` from an unrelated folder; its stdout lines (stderr must be empty)."""
    env = {k: v for k, v in os.environ.items() if k != "DSH_HOME"} | env_extra
    done = subprocess.run(
        [sys.executable, str(script)],
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
    lines = run(EXAMPLES / "idempotent_tool.py", tmp_path)
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
    lines = run(EXAMPLES / "library_app.py", tmp_path)
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
    assert run(EXAMPLES / "custom_policy.py", tmp_path) == [
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
    assert run(EXAMPLES / "crash_and_resume.py", tmp_path) == [
        "child killed by signal 9 while transfer() was running",
        "repaired TOOL_OUTCOME_UNKNOWN: The tool call was interrupted after it was recorded, but "
        "no result was durably recorded.",
        "turn 1 ended: interrupted",
        "turn 2 ended: completed",
        "the model now says: Its outcome is unknown: I will ask the bank before sending it again.",
    ]


def test_the_python_api_quickstart_runs(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(# weather\.py.*?)```", page, re.DOTALL)
    assert found is not None
    program = tmp_path / "weather.py"
    program.write_text(found.group(1), encoding="utf-8")
    lines = run(program, tmp_path, DSH_HOME=str(tmp_path / "home"))
    assert len(lines) == 1
    session, kind, text = lines[0].split(" ", 2)
    assert (session.startswith("s-"), kind, text) == (True, "completed", "Sunny, 24 °C.")
