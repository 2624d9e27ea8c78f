"""`dsh fork`: a new session from a stored one at a turn boundary, on every backend, listing the
tool calls that ran after the boundary (and whether each is read-only)."""

from __future__ import annotations

import json

import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import KINDS, Backend, make_backend, tool_turn
from postgres_support import postgres_fixture

from plugins.session.jsonutil import dumps
from plugins.session_persistence.testing import T0, open_tool_turn

postgres = postgres_fixture()

#: Turn 1 answers; turn 2 reads a file (read-only) and writes one (not read-only).
SOURCE = tool_turn(0, 1, []) + tool_turn(6, 2, [("c-read", "read_file"), ("c-write", "write_file")])


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, dsh: Sandbox) -> Backend:
    return make_backend(request.param, dsh, request)


def _events(dsh: Sandbox, backend: Backend, session_id: str) -> list[dict[str, object]]:
    shown = dsh("show", session_id, "--json", *backend.patches)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def test_fork_at_a_turn_lists_the_calls_that_ran_after_it(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("src", SOURCE, str(dsh.root), T0)
    made = dsh("fork", "src", "--turn", "1", "--as", "f1", "--json", *backend.patches)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == {
        "type": "forked",
        "sessionId": "f1",
        "parentSession": "src",
        "boundary": 5,
        "seedLength": 6,
        "toolCalls": [
            {
                "callId": "c-read",
                "name": "read_file",
                "turn": 2,
                "seq": 10,
                "readOnly": True,
                "outcome": "ok",
            },
            {
                "callId": "c-write",
                "name": "write_file",
                "turn": 2,
                "seq": 12,
                "readOnly": False,
                "outcome": "ok",
            },
        ],
    }
    forked = _events(dsh, backend, "f1")
    assert [dumps(e) for e in forked[:6]] == [dumps(e) for e in SOURCE[:6]]
    assert [e["type"] for e in forked[6:]] == ["session/end-seed"]
    header = json.loads(
        dsh("export", "f1", "--jsonl", "-", *backend.patches).stdout.splitlines()[0]
    )
    assert header["parentSession"] == "src"
    assert header["seedLength"] == 6
    assert [dumps(e) for e in _events(dsh, backend, "src")] == [dumps(e) for e in SOURCE]


def test_fork_warns_in_words_that_side_effects_may_repeat(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("src", SOURCE, str(dsh.root), T0)
    made = dsh("fork", "src", "--at", "5", "--as", "f2", *backend.patches)
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    assert lines[0].startswith("forked src at seq 5 as f2 (6 events seeded")
    assert "re-running from the fork may repeat 1 with side effects" in lines[1]
    assert "read_file (call c-read, turn 2, seq 10): read-only; result: ok" in lines[2]
    assert "write_file (call c-write, turn 2, seq 12): may have side effects" in lines[3]
    whole = dsh("fork", "src", "--as", "f3", *backend.patches)  # default: the last event
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.splitlines() == [
        f"forked src at seq {len(SOURCE) - 1} as f3 ({len(SOURCE)} events seeded; fork point "
        "recorded in its header)"
    ]


def test_fork_errors_name_the_rule(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("src", SOURCE, str(dsh.root), T0)
    cases = [
        (["--at", "2"], 1, 'fork boundary 2 in session "src" ends inside open turn 1'),
        (["--at", "99"], 1, 'fork boundary 99 is not a seq of session "src" (0..15)'),
        (["--turn", "7"], 1, 'session "src" has no ended turn 7 to fork at'),
        (["--as", "src"], 1, 'session "src" already exists'),
        (["--at", "5", "--turn", "1"], 2, "give --at SEQ or --turn N, not both"),
    ]
    for args, code, text in cases:
        done = dsh("fork", "src", *args, *backend.patches)
        assert done.returncode == code, (args, done.stderr)
        assert done.stderr == f"dsh: error: {text}\n", args
    missing = dsh("fork", "nope", *backend.patches)
    assert (missing.returncode, missing.stderr) == (1, 'dsh: error: session "nope" not found\n')
    listed = dsh("sessions", "--json", *backend.patches)
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["src"]


def test_a_crashed_source_is_forked_without_repairing_it(dsh: Sandbox, backend: Backend) -> None:
    crashed = tool_turn(0, 1, []) + open_tool_turn(6, 2, started=True)
    backend.seed("src", crashed, str(dsh.root), T0)
    made = dsh("fork", "src", "--turn", "1", "--as", "f1", "--json", *backend.patches)
    assert made.returncode == 0, made.stderr
    (call,) = json.loads(made.stdout)["toolCalls"]
    assert call == {
        "callId": "call-2",
        "name": "probe",
        "turn": 2,
        "seq": 10,
        "readOnly": None,
        "outcome": "unknown",
    }
    assert (
        "not a tool of this manifest: side effects unknown; result: unknown"
        in dsh("fork", "src", "--turn", "1", "--as", "f2", *backend.patches).stdout
    )
    raw = dsh("export", "src", "--jsonl", "-", *backend.patches).stdout.splitlines()
    assert [json.loads(line) for line in raw[1:]] == crashed  # the source is left as it was
