"""`dsh rm` and `dsh prune` on every backend: a running session is refused, prune keeps running,
waiting (a pending approval), recent, unreadable and the `--keep` newest sessions."""

from __future__ import annotations

import json

import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import KINDS, Backend, make_backend, tool_turn, write_jsonl_log
from postgres_support import postgres_fixture

from plugins.session.jsonutil import dumps
from plugins.session_persistence.testing import T0, event, open_tool_turn

postgres = postgres_fixture()


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, dsh: Sandbox) -> Backend:
    return make_backend(request.param, dsh, request)


def _ids(dsh: Sandbox, backend: Backend) -> list[str]:
    listed = dsh("sessions", "--json", *backend.patches)
    assert listed.returncode == 0, listed.stderr
    return sorted(json.loads(line)["id"] for line in listed.stdout.splitlines())


def _asked(turn_end: int) -> list[dict[str, object]]:
    """A completed turn, then an approval asked and never decided."""
    asked = {"id": "q-1", "toolName": "write_file", "callId": "c-1"}
    return [*tool_turn(0, 1, []), event(turn_end, "approval/asked", asked)]


def test_rm_removes_and_refuses_a_running_session(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("old", tool_turn(0, 1, []), str(dsh.root), T0)
    backend.seed("other", tool_turn(0, 1, []), str(dsh.root), T0 + 1)
    done = dsh("rm", "old", "--json", *backend.patches)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"type": "removed", "sessionId": "old"}
    assert _ids(dsh, backend) == ["other"]
    again = dsh("rm", "old", *backend.patches)
    assert (again.returncode, again.stderr) == (1, 'dsh: error: session "old" not found\n')
    with backend.hold(dsh.env(), "live", open_tool_turn(0, started=True)) as pid:
        refused = dsh("rm", "live", *backend.patches)
        assert refused.returncode == 1
        assert f'session "live" is locked by another writer (pid {pid} on host' in refused.stderr
        assert _ids(dsh, backend) == ["live", "other"]
    assert dsh("rm", "live", *backend.patches).returncode == 0  # its writer is gone
    assert _ids(dsh, backend) == ["other"]


def test_prune_keeps_running_waiting_recent_and_the_newest(dsh: Sandbox, backend: Backend) -> None:
    for index, name in enumerate(["a", "b", "c"]):  # T0 is long ago: all three are old
        backend.seed(name, tool_turn(0, 1, []), str(dsh.root), T0 + index)
    backend.seed("waiting", _asked(6), str(dsh.root), T0 + 5)
    assert dsh("run", "--session", "fresh", "hi", *backend.patches).returncode == 0
    with backend.hold(dsh.env(), "running", open_tool_turn(0, started=True)):
        dry = dsh("prune", "--older-than", "30d", "--dry-run", *backend.patches)
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert [line.split(" (")[0] for line in lines if line.startswith("would")] == [
            "would remove c",
            "would remove b",
            "would remove a",
        ]
        assert "kept waiting: an approval is pending" in lines
        assert "kept fresh: recently active" in lines
        assert any(line.startswith("kept running: running (pid ") for line in lines)
        assert _ids(dsh, backend) == ["a", "b", "c", "fresh", "running", "waiting"]

        # --keep 3 spares the three newest by creation: fresh, waiting and c.
        done = dsh("prune", "--older-than", "30d", "--keep", "3", "--json", *backend.patches)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert {line["sessionId"]: line["action"] for line in lines} == {
            "a": "removed",
            "b": "removed",
            "c": "keep",
            "fresh": "keep",
            "running": "keep",
            "waiting": "keep",
        }
        assert {line["sessionId"]: line.get("reason") for line in lines}["c"] == (
            "among the --keep newest"
        )
        assert _ids(dsh, backend) == ["c", "fresh", "running", "waiting"]


def test_prune_usage_errors(dsh: Sandbox) -> None:
    bad = dsh("prune", "--older-than", "soon")
    assert bad.returncode == 2
    assert "--older-than: 'soon' is not a duration" in bad.stderr
    assert dsh("prune").returncode == 2  # --older-than is required
    assert dsh("prune", "--older-than", "1d12h", "--dry-run").returncode == 0


def test_prune_keeps_a_log_it_cannot_read(dsh: Sandbox) -> None:
    turn = [dumps(e).encode() for e in tool_turn(0, 1, [])]
    log = write_jsonl_log(dsh, "damaged", [turn[:2], [b"{broken"], turn[2:]])
    damaged = log.read_bytes()
    done = dsh("prune", "--older-than", "1s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("kept damaged: cannot be read (corrupt session log: ")
    assert done.stdout.endswith("; see dsh doctor\n")
    assert log.read_bytes() == damaged
