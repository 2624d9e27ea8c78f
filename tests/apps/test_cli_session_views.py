"""`dsh sessions` (title or first-prompt preview, state, --limit, --state) and `dsh show`
(`--messages`: the transcript the model receives next; token usage per turn and in total)."""

from __future__ import annotations

import json

import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import KINDS, Backend, make_backend, tool_turn
from postgres_support import postgres_fixture

from plugins.session_persistence.testing import T0, event, open_tool_turn

postgres = postgres_fixture()

TOOL_OUTCOME_UNKNOWN = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, dsh: Sandbox) -> Backend:
    return make_backend(request.param, dsh, request)


def _rows(dsh: Sandbox, backend: Backend, *args: str) -> list[dict[str, object]]:
    listed = dsh("sessions", "--json", *args, *backend.patches)
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines()]


def test_sessions_show_title_state_and_filter(dsh: Sandbox, backend: Backend) -> None:
    long_prompt = "please " * 20
    titled = [
        *tool_turn(0, 1, []),
        event(
            6,
            "session/title",
            {"title": "Haiku work", "messageSeqs": [1], "source": {"kind": "user"}},
        ),
    ]
    backend.seed("titled", titled, str(dsh.root), T0)
    backend.seed("crashed", open_tool_turn(0, started=True), str(dsh.root), T0 + 1)
    asked = {"id": "q-1", "toolName": "write_file"}
    backend.seed(
        "asking", [*tool_turn(0, 1, []), event(6, "approval/asked", asked)], str(dsh.root), T0 + 2
    )
    assert dsh("run", "--session", "fresh", long_prompt, *backend.patches).returncode == 0
    with backend.hold(dsh.env(), "live", tool_turn(0, 1, [])[:3]):
        rows = {row["id"]: row for row in _rows(dsh, backend)}
        assert {key: row["state"] for key, row in rows.items()} == {
            "titled": "idle",
            "crashed": "interrupted",
            "asking": "waiting",
            "fresh": "idle",
            "live": "running",
        }
        assert rows["titled"]["title"] == "Haiku work"
        assert rows["crashed"]["title"] == "question 1"
        assert rows["fresh"]["title"] == ("please " * 9)[:59] + "…"
        assert [row["id"] for row in _rows(dsh, backend, "--limit", "2")] == ["fresh", "asking"]
        picked = _rows(dsh, backend, "--state", "interrupted", "--state", "waiting")
        assert [row["id"] for row in picked] == ["asking", "crashed"]
        only = _rows(dsh, backend, "--state", "running", "--limit", "1")
        assert [row["id"] for row in only] == ["live"]
        table = dsh("sessions", *backend.patches).stdout
        assert "Haiku work" in table
        assert "waiting" in table
    bad = dsh("sessions", "--state", "asleep", *backend.patches)
    assert (bad.returncode, bad.stderr) == (
        2,
        "dsh: error: --state: 'asleep' is not one of running, waiting, interrupted, idle\n",
    )


def test_show_messages_is_the_next_transcript(dsh: Sandbox, backend: Backend) -> None:
    crashed = tool_turn(0, 1, [], usage=1200) + open_tool_turn(7, 2, started=True)
    backend.seed("s", crashed, str(dsh.root), T0)
    shown = dsh("show", "s", "--messages", "--json", *backend.patches)
    assert shown.returncode == 0, shown.stderr
    transcript = json.loads(shown.stdout)
    assert transcript["sessionId"] == "s"
    assert transcript["system"] is None  # no request was logged
    messages = transcript["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    repair = messages[-1]["content"][0]
    assert repair["toolCallId"] == "call-2"
    assert repair["isError"] is True
    assert repair["content"] == [{"type": "text", "text": TOOL_OUTCOME_UNKNOWN}]
    text = dsh("show", "s", "--messages", *backend.patches).stdout.splitlines()
    assert text[:3] == ["[user] question 1", "[assistant] answer 1", "[user] question 2"]
    assert text[-1] == f"[tool result error call-2] {TOOL_OUTCOME_UNKNOWN}"
    assert len(dsh("export", "s", "--jsonl", "-", *backend.patches).stdout.splitlines()) == 13


def test_show_reports_token_usage_across_resumes(dsh: Sandbox, backend: Backend) -> None:
    assert dsh("run", "--session", "u", "first", *backend.patches).returncode == 0
    assert dsh("resume", "u", "second", *backend.patches).returncode == 0
    shown = dsh("show", "u", *backend.patches)
    assert shown.returncode == 0, shown.stderr
    tail = shown.stdout.splitlines()[-4:]
    assert tail[0] == "tokens:"
    assert tail[1].startswith("  turn 1: ")
    assert tail[2].startswith("  turn 2: ")
    first = [int(part.split()[0].replace(",", "")) for part in tail[1][10:].split(", ")]
    second = [int(part.split()[0].replace(",", "")) for part in tail[2][10:].split(", ")]
    total = [int(part.split()[0].replace(",", "")) for part in tail[3][9:].split(", ")]
    assert total == [a + b for a, b in zip(first, second, strict=True)]
    assert all(count > 0 for count in first + second)
