"""`dsh` and approval: the prompt on a real pseudo-terminal, blocked non-interactive runs,
`dsh approve` / `dsh deny`, and what `show` and `sessions` say about questions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
from dsh_sandbox import Sandbox

REPO = Path(__file__).parents[2]
NO_APPROVAL = REPO / "config" / "overlays" / "no-approval.yml"
BLOCK = {"DSH_APPROVAL_UNATTENDED": "block"}
AFTER = "      - text: Thanks, both calls are answered.\n"


def terminal(dsh: Sandbox, *args: str | Path, env: dict[str, str] | None = None) -> Any:
    """`dsh *args` on a pseudo-terminal (stdin, stdout and stderr)."""
    argv = dsh.argv(*args)
    return pexpect.spawn(
        argv[0],
        argv[1:],
        cwd=str(dsh.root),
        env=dsh.env({"TERM": "xterm", "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}),
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 200),
    )


def ledger(dsh: Sandbox) -> list[dict[str, Any]]:
    path = dsh.home / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def events(dsh: Sandbox, session_id: str, *patches: Path) -> list[dict[str, Any]]:
    args: list[str | Path] = ["show", session_id, "--json"]
    for patch in patches:
        args += ["--patch", patch]
    shown = dsh(*args)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def outcomes(log: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["outcome"] for e in log if e["type"] == "approval/decided"]


def test_the_terminal_prompt_allows_once_and_rejects_with_a_reason(dsh: Sandbox) -> None:
    child = terminal(dsh, "run", "--session", "s-tty", "Write a haiku")
    child.expect("needs your approval")
    child.expect("why: the tool is not marked read-only")
    child.expect('"path": "notes.txt"')  # the arguments, pretty-printed
    child.expect(r"\[y\] once  \[n\] reject  \[a\] always for write_file in this session: ")
    child.sendline("maybe")
    child.expect("answer y, n or a")
    child.sendline("y")
    child.expect("append_ledger")
    child.expect("needs your approval")
    child.expect("allow\\? ")
    child.sendline("n")
    child.expect("reason for the model \\(optional\\): ")
    child.sendline("the ledger is frozen today")
    child.expect("completed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (dsh.workspace / "notes.txt").read_text().startswith("Each event appended")
    assert ledger(dsh) == []
    log = events(dsh, "s-tty")
    assert outcomes(log) == ["allowed-once", "rejected"]
    (refused,) = [
        e
        for e in log
        if e["type"] == "tool/result"
        and e["data"]["message"]["source"]["callId"] == "call-ledger-notes"
    ]
    assert refused["data"]["message"]["content"][0]["content"] == [
        {"type": "text", "text": "Error: the user rejected this call: the ledger is frozen today"}
    ]
    shown = dsh("show", "s-tty")
    assert "write_file asks for approval: the tool is not marked read-only" in shown.stdout
    assert "write_file approval: allowed-once" in shown.stdout
    assert "append_ledger approval: rejected" in shown.stdout


def test_always_on_the_terminal_stops_asking_for_that_tool(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay(
        "twice.yml",
        "      - tool_calls: [{id: w1, name: write_file, arguments: {path: a.txt, content: a}}]\n"
        "      - tool_calls: [{id: w2, name: write_file, arguments: {path: b.txt, content: b}}]\n"
        "      - text: Two files.\n",
    )
    child = terminal(dsh, "run", "--patch", overlay, "--session", "s-always", "go")
    child.expect("needs your approval")
    child.expect("allow\\? ")
    child.sendline("a")
    child.expect("Two files.")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "needs your approval" not in (child.before or "")
    assert (dsh.workspace / "b.txt").read_text() == "b"
    log = events(dsh, "s-always", overlay)
    assert outcomes(log) == ["allowed-once"]
    (always,) = [e for e in log if e["type"] == "approval/always"]
    assert always["ignorable"] is True
    assert "write_file always allowed in this session" in dsh("show", "s-always").stdout


def test_a_blocked_run_is_answered_later_with_approve_and_deny(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    blocked = dsh("run", "--json", "--session", "s-wait", "Write a haiku", env=BLOCK)
    assert blocked.returncode == 1, blocked.stderr
    lines = [json.loads(line) for line in blocked.stdout.splitlines()]
    needed = [line for line in lines if line["type"] == "approval-needed"]
    assert [(n["callId"], n["name"]) for n in needed] == [
        ("call-write-notes", "write_file"),
        ("call-ledger-notes", "append_ledger"),
    ]
    assert needed[0]["arguments"]["path"] == "notes.txt"
    assert needed[0]["reason"] == "the tool is not marked read-only"
    assert needed[0]["approve"] == "dsh approve s-wait call-write-notes"
    assert needed[0]["deny"] == "dsh deny s-wait call-write-notes --reason TEXT"
    assert lines[-1]["type"] == "result"
    assert lines[-1]["reason"] == {"kind": "blocked"}
    assert not (dsh.workspace / "notes.txt").exists()
    assert [line["type"] for line in lines].count("tool-result") == 0

    listed = [json.loads(line) for line in dsh("sessions", "--json").stdout.splitlines()]
    assert [(row["id"], row["waitingApprovals"]) for row in listed] == [("s-wait", 2)]
    state = dsh("resume", "s-wait").stdout.splitlines()
    assert state[0] == "nothing to recover"
    assert state[-2:] == [
        "waiting for approval: write_file (call-write-notes); answer with dsh approve s-wait "
        "call-write-notes or dsh deny s-wait call-write-notes",
        "waiting for approval: append_ledger (call-ledger-notes); answer with dsh approve "
        "s-wait call-ledger-notes or dsh deny s-wait call-ledger-notes",
    ]
    assert "blocked — waiting for approval (2)" in dsh("sessions").stdout

    prompt = dsh("run", "--session", "s-wait", "something else", env=BLOCK)
    assert prompt.returncode == 1
    assert prompt.stderr.strip().splitlines()[-1] == (
        'dsh: error: session "s-wait" is waiting for an answer to 2 approvals: write_file '
        "(call-write-notes), append_ledger (call-ledger-notes); answer with dsh approve s-wait "
        "call-write-notes or dsh deny s-wait call-write-notes"
    )
    unguarded = dsh("run", "--session", "s-wait", "--patch", NO_APPROVAL, "go on", env=BLOCK)
    assert unguarded.returncode == 2
    assert "the manifest mounts no approval plugin" in unguarded.stderr
    assert dsh("approve", "s-wait", "--patch", NO_APPROVAL).returncode == 2
    ambiguous = dsh("approve", "s-wait", env=BLOCK)
    assert ambiguous.returncode == 2
    assert "name the call to answer" in ambiguous.stderr
    as_json = dsh("approve", "s-wait", "--json", env=BLOCK)
    error = json.loads(as_json.stdout.splitlines()[-1])
    assert (error["type"], error["code"]) == ("error", "APPROVAL_AMBIGUOUS")
    wrong = dsh("approve", "s-wait", "call-nope", env=BLOCK)
    assert wrong.returncode == 1
    assert 'not waiting for an approval of call "call-nope"' in wrong.stderr

    after = replay_overlay("after.yml", AFTER)
    first = dsh("approve", "s-wait", "call-write-notes", "--always", "--patch", after, env=BLOCK)
    assert first.returncode == 1, first.stderr  # still blocked: the ledger call waits
    assert (dsh.workspace / "notes.txt").read_text().startswith("Each event appended")
    assert "append_ledger (call-ledger-notes) needs approval" in first.stderr
    assert f"dsh approve s-wait call-ledger-notes --patch {after}" in first.stderr
    assert ledger(dsh) == []

    second = dsh(
        "deny", "s-wait", "--reason", "not this time", "--patch", after, "--json", env=BLOCK
    )
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout.splitlines()[-1])
    assert result["output"] == "Thanks, both calls are answered."
    assert ledger(dsh) == []

    log = events(dsh, "s-wait")
    assert outcomes(log) == ["allowed-once", "rejected"]
    assert [e["data"]["toolName"] for e in log if e["type"] == "approval/always"] == ["write_file"]
    results = [e for e in log if e["type"] == "tool/result"]
    assert [r["data"]["message"]["source"]["callId"] for r in results] == [
        "call-write-notes",
        "call-ledger-notes",
    ]
    notes = [
        e["data"]["content"][0]["text"]
        for e in log
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "plugin"
    ]
    assert notes == [
        "The user answered the approval question for append_ledger (call call-ledger-notes): "
        "rejected: not this time."
    ]  # the note of the first answer was claimed by a turn that ended blocked again
    answered = dsh("approve", "s-wait", env=BLOCK)
    assert answered.returncode == 1
    assert answered.stderr.strip().splitlines()[-1] == (
        'dsh: error: session "s-wait" is not waiting for an approval'
    )
    listed = [json.loads(line) for line in dsh("sessions", "--json").stdout.splitlines()]
    assert listed[0]["waitingApprovals"] == 0


def test_approve_names_a_stored_session(dsh: Sandbox) -> None:
    missing = dsh("approve", "s-none")
    assert missing.returncode == 1
    assert missing.stderr.strip() == 'dsh: error: session "s-none" not found'
    assert not (dsh.home / "sessions").exists() or not any((dsh.home / "sessions").rglob("*"))


def test_unattended_refuse_and_the_no_approval_overlay(dsh: Sandbox) -> None:
    refused = dsh("run", "--json", "hi", env={"DSH_APPROVAL_UNATTENDED": "refuse"})
    assert refused.returncode == 0, refused.stderr
    results = [
        json.loads(line)
        for line in refused.stdout.splitlines()
        if json.loads(line)["type"] == "tool-result"
    ]
    assert [r["value"] for r in results] == [
        "Error: nobody could approve this call (no approver answered); the call was not run"
    ] * 2
    assert not (dsh.workspace / "notes.txt").exists()
    (result,) = [json.loads(line) for line in refused.stdout.splitlines()[-1:]]
    assert result["output"].startswith("I could not finish: a tool call failed or was not allowed")

    free = dsh("run", "--patch", NO_APPROVAL, "hi", env=BLOCK)
    assert free.returncode == 0, free.stderr
    assert (dsh.workspace / "notes.txt").exists()
    assert len(ledger(dsh)) == 1


def test_ctrl_c_at_the_prompt_cancels_the_question_and_the_turn(dsh: Sandbox) -> None:
    child = terminal(dsh, "run", "--session", "s-int", "hi")
    child.expect("allow\\? ")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    log = events(dsh, "s-int")
    assert outcomes(log) == ["cancelled"]
    assert log[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert not (dsh.workspace / "notes.txt").exists()


def test_what_the_prompt_prints_cannot_drive_the_terminal() -> None:
    from apps.cli.approving import pretty, printable

    assert printable("call-\x1b[2Jx\n") == "call-\\u001b[2Jx\\u000a"
    assert pretty('{"path": "a\\u001b"}') == '{\n  "path": "a\\u001b"\n}'
    assert pretty("not json \x1b[31m") == '"not json \\u001b[31m"'


def test_approval_command_errors_carry_stable_codes() -> None:
    import pytest

    from apps.cli import approving
    from apps.cli.errors import CliError
    from plugins.tool_approval import Question

    one = Question("q1", "write_file", "c1", None, 5, 1)
    two = Question("q2", "append_ledger", "c2", None, 7, 1)
    assert approving.chosen("s", [one], None) is one
    assert approving.chosen("s", [one, two], "c2") is two
    cases = [([], None, approving.NOT_WAITING, 1), ([one, two], None, approving.AMBIGUOUS, 2)]
    cases.append(([one], "c9", approving.NOT_WAITING, 1))
    for pending, call_id, code, exit_code in cases:
        with pytest.raises(CliError) as caught:
            approving.chosen("s", pending, call_id)
        assert (caught.value.code, caught.value.exit_code) == (code, exit_code)


def test_an_approved_call_is_shown_with_its_tool_name(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay(
        "one.yml",
        "      - tool_calls: [{id: w1, name: write_file, arguments: {path: a.txt, content: a}}]\n"
        "      - text: Written.\n",
    )
    blocked = dsh("run", "--json", "--patch", overlay, "--session", "s-one", "Write", env=BLOCK)
    assert blocked.returncode == 1, blocked.stderr
    # The call was made in turn 1; turn 2 (after the answer) runs it and streams its result.
    answered = dsh("approve", "s-one", "--json", "--patch", overlay, env=BLOCK)
    assert answered.returncode == 0, answered.stderr
    lines = [json.loads(line) for line in answered.stdout.splitlines()]
    (result,) = [line for line in lines if line["type"] == "tool-result"]
    assert (result["callId"], result["name"], result["isError"]) == ("w1", "write_file", False)
    assert lines[-1]["output"] == "Written."
    human = dsh("run", "--patch", overlay, "--session", "s-two", "Write", env=BLOCK)
    assert human.returncode == 1, human.stderr
    shown = dsh("approve", "s-two", "--patch", overlay, env=BLOCK)
    assert shown.returncode == 0, shown.stderr
    assert '✓ write_file: {"path":"a.txt","bytes":1}' in shown.stderr.splitlines()
