"""`dsh run` never says "completed" unless the turn's end is durable: the disk breaks at the last
checkpoint (a full disk, a failing device, a read-only file system) or under the write-behind with
the policy omitted, and the run reports the storage failure and exits 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox

FAULTS = Path(__file__).parent / "faults"
NO_CHECKPOINTS = Path(__file__).parents[2] / "config" / "overlays" / "no-checkpoints.yml"


def _broken_disk(dsh: Sandbox, *, after: str, call: str, code: str) -> Path:
    """An overlay mounting `faults/broken_disk.py`, copied beside it into the sandbox."""
    shutil.copy(FAULTS / "broken_disk.py", dsh.root / "broken_disk.py")
    return dsh.write(
        "broken.yml",
        "- insert:\n"
        "    - id: broken-disk\n"
        "      name: ./broken_disk.py\n"
        f"      config: {{after: {after}, call: {call}, errno: {code}}}\n",
    )


@pytest.mark.parametrize(
    ("call", "code", "text"),
    [
        ("write", "ENOSPC", "No space left on device"),
        ("fsync", "EIO", "Input/output error"),
        ("write", "EROFS", "Read-only file system"),
    ],
)
def test_a_failing_final_checkpoint_is_reported_and_exits_1(
    dsh: Sandbox, call: str, code: str, text: str
) -> None:
    overlay = _broken_disk(dsh, after="turn/end", call=call, code=code)
    human = dsh("run", "--patch", overlay, "--session", "s-human", "hi")
    assert human.returncode == 1, human.stderr
    assert "✓ completed" not in human.stderr
    (outcome,) = [line for line in human.stderr.splitlines() if line.startswith("✗")]
    assert outcome.startswith("✗ error: the turn ended (completed) but storing it failed: ")
    assert outcome.endswith(f"{text} (SESSION_NOT_DURABLE)")
    assert "Traceback" not in human.stderr
    # Every failure is one line: no traceback or exception-group frames from the teardown.
    assert not [line for line in human.stderr.splitlines() if line.startswith((" ", "|", "+"))]

    machine = dsh("run", "--json", "--patch", overlay, "--session", "s-json", "hi")
    assert machine.returncode == 1, machine.stderr
    final = json.loads(machine.stdout.splitlines()[-1])
    assert final["type"] == "result"
    assert final["reason"]["kind"] == "error"
    assert final["reason"]["error"]["code"] == "SESSION_NOT_DURABLE"
    assert text in final["reason"]["error"]["message"]
    assert final["reason"]["turnReason"] == {"kind": "completed"}


def test_failing_write_behind_without_the_policy_is_reported(dsh: Sandbox) -> None:
    overlay = _broken_disk(dsh, after="step/start", call="write", code="ENOSPC")
    result = dsh(
        "run", "--json", "--patch", NO_CHECKPOINTS, "--patch", overlay, "--session", "s-wb", "hi"
    )
    assert result.returncode == 1, result.stderr
    final = json.loads(result.stdout.splitlines()[-1])
    assert final["reason"]["error"]["code"] == "SESSION_NOT_DURABLE"
    assert "No space left on device" in final["reason"]["error"]["message"]
    assert "Traceback" not in result.stderr


def test_a_healthy_disk_still_completes(dsh: Sandbox) -> None:
    overlay = _broken_disk(dsh, after="never/happens", call="write", code="ENOSPC")
    result = dsh("run", "--json", "--patch", overlay, "hi")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["reason"] == {"kind": "completed"}
