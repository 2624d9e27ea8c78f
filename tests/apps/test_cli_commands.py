"""`dsh run`, `sessions`, `show`, `resume`, `plugins` and error reporting, through the real
console script."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from dsh_sandbox import Sandbox

ANSI = re.compile(r"\x1b\[")
ONE_STEP = """\
      - tool_calls:
          - id: call-1
            name: write_file
            arguments: {path: a.txt, content: hello}
      - text: All done.
"""


def _session_ids(dsh: Sandbox) -> list[str]:
    listed = dsh("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line)["id"] for line in listed.stdout.splitlines()]


def test_run_default_manifest_then_sessions_and_show(dsh: Sandbox) -> None:
    result = dsh("run", "Write a haiku about durable logs into notes.txt")
    assert result.returncode == 0, result.stderr
    # Piped stdout carries only the assistant's text; decorations went to stderr.
    assert result.stdout.startswith("Done. I wrote a haiku")
    assert "→ write_file" in result.stderr
    assert "✓ append_ledger" in result.stderr
    assert "✓ completed" in result.stderr
    assert not ANSI.search(result.stdout + result.stderr)
    assert "waiting for the model" not in result.stderr
    assert (dsh.workspace / "notes.txt").read_text().startswith("Each event appended,")
    (session_id,) = _session_ids(dsh)
    assert re.fullmatch(r"s-\d{8}-[0-9a-f]{6}", session_id)
    assert f"session {session_id}" in result.stderr

    table = dsh("sessions")
    assert table.returncode == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith(session_id))
    assert row.split()[3:5] == ["1", "completed"]

    shown = dsh("show", session_id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    for expected in (
        "▶ turn 1",
        "◆ step 1",
        "you: Write a haiku about durable logs into notes.txt",
        "◆ → write_file",
        "✓ write_file",
        "◆ step 2",
        "assistant: Done.",
        "■ turn 1 completed",
    ):
        assert expected in text, expected


def test_run_json_lines(dsh: Sandbox, replay_overlay: Callable[..., Path]) -> None:
    overlay = replay_overlay("fast.yml", ONE_STEP)
    result = dsh("run", "--json", "--patch", overlay, "--session", "s-json", "go")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert types == ["session", "tool-call", "tool-result", "text", "text", "result"]
    session, call, tool_result, *texts, final = lines
    assert session == {"type": "session", "sessionId": "s-json", "resumed": False}
    assert call == {
        "type": "tool-call",
        "callId": "call-1",
        "name": "write_file",
        "arguments": {"path": "a.txt", "content": "hello"},
    }
    assert tool_result["callId"] == "call-1"
    assert tool_result["isError"] is False
    assert tool_result["value"] == {"path": "a.txt", "bytes": 5}
    assert texts == [{"type": "text", "text": "All done"}, {"type": "text", "text": "."}]
    assert final == {
        "type": "result",
        "sessionId": "s-json",
        "stored": True,
        "output": "All done.",
        "reason": {"kind": "completed"},
    }


def test_a_failed_turn_exits_1(dsh: Sandbox, replay_overlay: Callable[..., Path]) -> None:
    overlay = replay_overlay("fail.yml", "      - error: {code: AUTH, message: bad key}\n")
    result = dsh("run", "--json", "--patch", overlay, "--session", "s-fail", "hi")
    assert result.returncode == 1
    final = json.loads(result.stdout.splitlines()[-1])
    assert final["reason"] == {"kind": "error", "error": {"message": "bad key", "code": "AUTH"}}
    human = dsh("run", "--patch", overlay, "--session", "s-fail", "again")
    assert human.returncode == 1
    assert "✗ error: bad key (AUTH)" in human.stderr


def test_run_reads_prompt_from_stdin_and_resumes_named_session(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    # Two responses: the second process continues the session's script where it is.
    overlay = replay_overlay("fast.yml", "      - text: Hi.\n      - text: Hi again.\n")
    first = dsh("run", "--patch", overlay, "--session", "s-named", input="hello from stdin\n")
    assert first.returncode == 0, first.stderr
    second = dsh("run", "--patch", overlay, "--session", "s-named", "again")
    assert second.returncode == 0, second.stderr
    assert "(resumed)" in second.stderr
    events = [json.loads(line) for line in dsh("show", "s-named", "--json").stdout.splitlines()]
    prompts = [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]
    assert prompts == ["hello from stdin\n", "again"]
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/end"] == [1, 2]

    newer = dsh("run", "--patch", overlay, "--json", "a new session")
    newer_id = json.loads(newer.stdout.splitlines()[-1])["sessionId"]
    listed = [json.loads(line) for line in dsh("sessions", "--json").stdout.splitlines()]
    assert [(row["id"], row["turns"]) for row in listed] == [(newer_id, 1), ("s-named", 2)]


def test_show_json_and_raw_match_the_stored_log(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("fast.yml", "      - text: Hi.\n")
    assert dsh("run", "--patch", overlay, "--session", "s-show", "hi").returncode == 0
    lines = dsh("show", "s-show", "--json").stdout.splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["type", "seq", "time", "data"]
    assert [json.loads(line)["seq"] for line in lines] == list(range(len(lines)))
    (log,) = dsh.home.rglob("session.jsonl.zstd")
    raw = subprocess.run(
        dsh.argv("show", "s-show", "--raw"), cwd=dsh.root, env=dsh.env(), capture_output=True
    )
    assert raw.returncode == 0
    assert raw.stdout == log.read_bytes()


def test_show_raw_refused_by_sqlite_backend(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("fast.yml", "      - text: Hi.\n")
    sqlite = Path(__file__).parents[2] / "config" / "overlays" / "sqlite.yml"
    assert (
        dsh("run", "--patch", sqlite, "--patch", overlay, "--session", "s-q", "hi").returncode == 0
    )
    listed = dsh("sessions", "--patch", sqlite, "--json")
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["s-q"]
    raw = dsh("show", "s-q", "--raw", "--patch", sqlite)
    assert raw.returncode == 1
    assert raw.stderr == (
        "dsh: error: this session persistence backend does not expose raw artifacts\n"
    )


def test_errors_are_one_line_and_exit_codes(dsh: Sandbox) -> None:
    missing = dsh("show", "s-nope")
    assert (missing.returncode, missing.stderr) == (1, 'dsh: error: session "s-nope" not found\n')
    not_stored = dsh("resume", "s-nope")
    assert (not_stored.returncode, not_stored.stderr) == (
        1,
        'dsh: error: session "s-nope" not found\n',
    )
    debug = dsh("show", "s-nope", "--debug")
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr

    no_file = dsh("run", "-c", "nowhere.yml", "hi")
    assert no_file.returncode == 2
    assert no_file.stderr.startswith("dsh: error: failed to read config file nowhere.yml")
    assert "Traceback" not in no_file.stderr

    # A row waiting for a service that nothing provides: a boot error, exit 2, one line.
    dsh.write("lonely.yml", "- id: agent\n  name: dsh-agent\n")
    boot = dsh("run", "-c", "lonely.yml", "hi")
    assert boot.returncode == 2
    (error,) = boot.stderr.splitlines()
    assert error.startswith("dsh: error: failed to boot lonely.yml: 1 entries did not start: ")
    assert error.endswith(
        "agent (dsh-agent): waiting for services: sessions, llm, tools; "
        'service "sessions" is not provided by any row; add a row with name: dsh-session; '
        'service "llm" is not provided by any row; add a row with name: dsh-llm; '
        'service "tools" is not provided by any row; add a row with name: dsh-tools'
    )
    assert ":;" not in error
    assert "Traceback" not in boot.stderr

    usage = dsh("run", "--no-such-option")
    assert usage.returncode == 2
    empty = dsh("run", input="")
    assert (empty.returncode, empty.stderr) == (
        2,
        "dsh: error: no prompt given (pass PROMPT or pipe it on stdin)\n",
    )


def test_dsh_config_environment_variable_selects_the_manifest(dsh: Sandbox) -> None:
    dsh.write("other.yml", "- id: s\n  name: dsh-session\n")
    result = dsh("check", env={"DSH_CONFIG": str(dsh.root / "other.yml")})
    assert result.returncode == 0
    assert result.stdout == f"ok: {dsh.root / 'other.yml'}\n"


def test_plugins_lists_entry_points(dsh: Sandbox) -> None:
    result = dsh("plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in map(json.loads, result.stdout.splitlines())}
    assert rows["dsh-agent"]["module"] == "plugins.agent"
    assert rows["dsh-agent"]["provides"] == ["agents"]
    assert rows["dsh-session-persistence-jsonl"]["provides"] == ["sessionPersistence"]
    assert rows["dsh-demo-tools"]["provides"] == []
    assert "dsh-llm-replay" in dsh("plugins").stdout


def test_show_draws_barriers_only_where_the_manifest_mounts_a_policy(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("fast.yml", ONE_STEP)
    assert dsh("run", "--patch", overlay, "--session", "s-marks", "go").returncode == 0
    config = Path(__file__).parents[2] / "config" / "overlays"
    with_policy = dsh("show", "s-marks").stdout
    assert "◆ checkpoint barrier of @deepseek-ai/dsh-session-checkpoint-policy: the events " in (
        with_policy
    )
    assert "  ◆ step 1" in with_policy
    assert "    ◆ → write_file" in with_policy
    strict = dsh("show", "s-marks", "--patch", config / "strict-checkpoints.yml").stdout
    assert "  ◆ step 1" in strict
    without = dsh("show", "s-marks", "--patch", config / "no-checkpoints.yml").stdout
    assert without.count("◆") == 1  # only in the legend's "no ◆ marks"
    assert "no ◆ marks: this manifest mounts no checkpoint policy" in without
    assert "  step 1" in without
    assert "    → write_file" in without
