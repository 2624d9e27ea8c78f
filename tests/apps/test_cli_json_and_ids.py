"""`--json` output a program can use, and session ids: `resume` of an unknown id, an empty id,
suggestions that quote ids, a closed stdout."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from dsh_sandbox import Sandbox

REASONING_AND_TOOL = """\
      - reasoning: Let me think.
        tool_calls:
          - id: call-1
            name: write_file
            arguments: {path: a.txt, content: hello}
      - text: Done.
"""


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_starts_with_the_session_and_types_reasoning_and_tool_values(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("fast.yml", REASONING_AND_TOOL)
    result = dsh("run", "--json", "--patch", overlay, "--session", "s-j", "go")
    assert result.returncode == 0, result.stderr
    lines = _lines(result.stdout)
    assert lines[0] == {"type": "session", "sessionId": "s-j", "resumed": False}
    reasoning = [line["text"] for line in lines if line["type"] == "reasoning"]
    assert "".join(map(str, reasoning)) == "Let me think."
    text = [line["text"] for line in lines if line["type"] == "text"]
    assert "".join(map(str, text)) == "Done."
    (tool_result,) = [line for line in lines if line["type"] == "tool-result"]
    assert tool_result["value"] == {"path": "a.txt", "bytes": 5}
    assert lines[-1]["type"] == "result"

    again = dsh("run", "--json", "--patch", overlay, "--session", "s-j", "more")
    first = _lines(again.stdout)[0]
    assert first == {
        "type": "session",
        "sessionId": "s-j",
        "resumed": True,
        "recovered": {
            "unknownOutcome": 0,
            "notStarted": 0,
            "interruptedTurns": [],
            "cancelledApprovals": 0,
        },
    }


def test_json_errors_are_one_json_object_on_stdout_too(dsh: Sandbox) -> None:
    missing = dsh("resume", "s-nope", "--json")
    assert missing.returncode == 1
    assert missing.stderr == 'dsh: error: session "s-nope" not found\n'
    assert _lines(missing.stdout) == [
        {"type": "error", "code": "SESSION_NOT_FOUND", "message": 'session "s-nope" not found'}
    ]
    bad = dsh("run", "--json", "-c", "nowhere.yml", "hi")
    assert bad.returncode == 2
    (error,) = _lines(bad.stdout)
    assert error["type"] == "error"
    assert error["code"] == "MANIFEST_INVALID"
    assert str(error["message"]).startswith("failed to read config file nowhere.yml")
    shown = dsh("show", "s-nope", "--json")
    assert _lines(shown.stdout)[0]["code"] == "SESSION_NOT_FOUND"


def test_json_usage_errors_are_one_json_object_on_stdout_too(dsh: Sandbox) -> None:
    cases = {
        ("sessions", "--json", "--bogus"): "No such option: --bogus",
        ("show", "--json"): "Missing argument 'ID'.",
        ("sessions", "--json", "--limit", "-1"): "Invalid value for '--limit'",
        ("bogus", "--json"): "No such command 'bogus'.",
    }
    for args, message in cases.items():
        result = dsh(*args)
        assert result.returncode == 2, args
        (error,) = _lines(result.stdout)
        assert (error["type"], error["code"]) == ("error", "USAGE"), args
        assert str(error["message"]).startswith(message), args
        assert message in result.stderr, args
    plain = dsh("sessions", "--bogus")
    assert (plain.returncode, plain.stdout) == (2, "")
    after_separator = dsh("rm", "--", "--json", "--bogus")  # session ids, not options
    assert after_separator.stdout == ""


def test_resume_of_an_unknown_id_with_a_prompt_writes_nothing(dsh: Sandbox) -> None:
    result = dsh("resume", "TYPO", "a prompt")
    assert (result.returncode, result.stderr) == (1, 'dsh: error: session "TYPO" not found\n')
    assert dsh.files() == {}
    assert dsh("sessions", "--json").stdout == ""
    created = dsh("run", "--session", "NEW", "a prompt")
    assert created.returncode == 0, created.stderr
    assert [line["id"] for line in _lines(dsh("sessions", "--json").stdout)] == ["NEW"]


def test_an_empty_session_id_is_a_usage_error(dsh: Sandbox) -> None:
    for argv in (("run", "--session", "", "hi"), ("resume", "", "hi"), ("resume", "")):
        result = dsh(*argv)
        assert (result.returncode, result.stderr) == (
            2,
            "dsh: error: a session id must not be empty\n",
        ), argv
    assert dsh.files() == {}


def test_the_resume_suggestion_quotes_an_id_that_needs_it(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("fast.yml", "      - text: Hi.\n")
    odd = "my session; rm -rf x"
    result = dsh("run", "--patch", overlay, "--session", odd, "hi")
    assert result.returncode == 0, result.stderr
    assert f'continue with: dsh resume {shlex.quote(odd)} "…"' in result.stderr
    plain = dsh("run", "--patch", overlay, "--session", "s-plain", "hi")
    assert 'continue with: dsh resume s-plain "…"' in plain.stderr


def test_a_closed_stdout_ends_the_output_quietly_and_the_turn_is_durable(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    words = " ".join(f"word{i}" for i in range(300))
    overlay = replay_overlay("long.yml", f"      - text: {words}\n", delay_ms=1)
    process = dsh.start(
        "run",
        "--json",
        "--patch",
        overlay,
        "--session",
        "s-pipe",
        "hi",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    head = [process.stdout.readline() for _ in range(3)]
    process.stdout.close()  # `| head -3`
    err = process.stderr.read()
    assert process.wait(timeout=60) == 0, err
    assert json.loads(head[0])["type"] == "session"
    assert err == ""
    shown = _lines(dsh("show", "s-pipe", "--json").stdout)
    assert shown[-1]["type"] == "turn/end"
    assert shown[-1]["data"]["reason"] == {"kind": "completed"}


def test_a_20_mb_prompt_is_stored_in_its_two_documented_places(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    """docs/cli.md: the inbox splice and the `user/message` each hold the prompt (the log format
    fixes both); nothing else copies it."""
    overlay = replay_overlay("fast.yml", "      - text: ok\n")
    prompt = "durable " * 2_500_000  # 20 MB
    result = dsh("run", "--json", "--patch", overlay, "--session", "s-big", input=prompt)
    assert result.returncode == 0, result.stderr[-2000:]
    shown = dsh("show", "s-big", "--json").stdout.splitlines()
    holding = [json.loads(line)["type"] for line in shown if len(line) > len(prompt)]
    assert holding == ["agent/inbox/spliced", "user/message"]
