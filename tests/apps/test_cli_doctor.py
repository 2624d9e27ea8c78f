"""`dsh doctor`: read-only checks with a sentence and a fix per finding (exit 1), `--apply` makes
only the repair a load makes, after a backup copy; exit 0 once clean."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import KINDS, Backend, _build, make_backend, tool_turn, write_jsonl_log
from postgres_support import postgres_fixture

from plugins.session.jsonutil import dumps
from plugins.session_persistence.testing import T0, open_tool_turn, running
from plugins.session_persistence_jsonl import frames

postgres = postgres_fixture()


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, dsh: Sandbox) -> Backend:
    return make_backend(request.param, dsh, request)


def _wait_free(backend: Backend, session_id: str) -> None:
    """Until no writer holds `session_id` (a server frees a killed client's lock soon after)."""

    async def wait() -> None:
        async with running(_build(backend.factory, backend.kwargs)) as w:
            for _ in range(200):
                if await w.service.owner(session_id) is None:
                    return
                await anyio.sleep(0.05)
        raise AssertionError(f"{session_id} stayed locked")

    anyio.run(wait)


def _findings(stdout: str) -> dict[str, dict[str, object]]:
    return {
        line["check"]: line
        for line in map(json.loads, stdout.splitlines())
        if line["type"] == "finding"
    }


def test_a_crashed_session_is_explained_then_repaired(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("fine", tool_turn(0, 1, []), str(dsh.root), T0)
    with backend.hold(dsh.env(), "crashed", open_tool_turn(0, started=True)) as pid:
        running_now = dsh("doctor", "crashed", *backend.patches)
        assert (running_now.returncode, running_now.stdout) == (
            0,
            "ok: 1 session(s) checked, nothing found\n",
        )  # its writer is at work: an open turn is normal
    _wait_free(backend, "crashed")
    before = dsh("export", "crashed", "--jsonl", "-", *backend.patches).stdout

    checked = dsh("doctor", "crashed", "--json", *backend.patches)
    assert checked.returncode == 1, checked.stderr
    found = _findings(checked.stdout)
    assert found["open turn"]["message"] == (
        "turn 1 never ended (1 tool call with unknown outcome): the process running it stopped."
    )
    assert found["open turn"]["repairable"] is True
    if backend.kind in ("sqlite", "postgres"):
        assert found["stale lock"]["message"].startswith(f"a lock record names pid {pid} on host")
    assert dsh("export", "crashed", "--jsonl", "-", *backend.patches).stdout == before

    text = dsh("doctor", "crashed", *backend.patches)
    assert text.returncode == 1
    assert (
        "crashed: open turn: turn 1 never ended (1 tool call with unknown outcome): the process "
        "running it stopped. Fix: `dsh doctor ID --apply` (or `dsh resume ID`) closes it as "
        "interrupted.\n"
    ) in text.stdout

    applied = dsh("doctor", "crashed", "--apply", *backend.patches)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    lines = applied.stdout.splitlines()
    backup = Path(lines[0].split(" in ", 1)[1])
    assert lines[0] == f"crashed: backup of the stored log in {backup}"
    assert backup.parent == dsh.home / "backups"
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
    assert lines[1] == (
        "crashed: appended 3 closing events (seq 5..7): 1 tool call with unknown outcome, "
        "turn 1 closed as interrupted"
    )
    assert lines[-1] == "ok: 1 session(s) checked, nothing found"
    after = dsh("export", "crashed", "--jsonl", "-", *backend.patches).stdout.splitlines()
    assert after[: len(before.splitlines())] == before.splitlines()
    assert [json.loads(line)["type"] for line in after[-3:]] == [
        "tool/result",
        "step/end",
        "turn/end",
    ]
    every = dsh("doctor", "--all", "--json", *backend.patches)
    assert every.returncode == 0, every.stdout
    assert json.loads(every.stdout.splitlines()[-1]) == {
        "type": "summary",
        "sessions": 2,
        "findings": 0,
    }


def _lines(events: list[dict[str, object]]) -> list[bytes]:
    return [dumps(e).encode() for e in events]


def test_jsonl_findings_each_name_the_problem_and_the_fix(dsh: Sandbox) -> None:
    turn = tool_turn(0, 1, [])
    torn = write_jsonl_log(dsh, "torn", [_lines(turn)])
    torn.write_bytes(torn.read_bytes() + frames.compress_frame(b'{"type":"turn/start"')[:-6])
    corrupt = write_jsonl_log(dsh, "corrupt", [_lines(turn[:2]), [b"{broken"], _lines(turn[2:])])
    loose = write_jsonl_log(dsh, "loose", [_lines(turn)])
    loose.chmod(0o644)
    loose.parent.chmod(0o755)
    legacy = [*turn[:5], {**turn[5], "data": {"turn": 1, "reason": {"kind": "disposed"}}}]
    write_jsonl_log(dsh, "legacy", [_lines(legacy)])
    asked = tool_turn(6, 2, [("c-1", "write_file")])
    unanswered = [*turn, *asked[:-4], *asked[-2:]]  # the call's tool/call and result dropped
    for index, item in enumerate(unanswered):
        item["seq"] = index
    write_jsonl_log(dsh, "unanswered", [_lines(unanswered)])

    checked = dsh("doctor", "--all", "--json")
    assert checked.returncode == 1, checked.stderr
    by_session: dict[str, dict[str, dict[str, object]]] = {}
    for line in map(json.loads, checked.stdout.splitlines()):
        if line["type"] == "finding":
            by_session.setdefault(line["sessionId"], {})[line["check"]] = line
    assert by_session["torn"]["torn tail"]["message"].startswith("the log ends in ")
    assert by_session["torn"]["torn tail"]["repairable"] is True
    assert by_session["corrupt"]["corruption"]["message"].startswith(
        "corrupt session log: unparsable committed event at line 3"
    )
    assert by_session["corrupt"]["corruption"]["repairable"] is False
    assert set(by_session["loose"]) == {"permissions"}
    assert by_session["legacy"]["legacy shapes"]["message"].startswith("1 stored events use")
    assert by_session["unanswered"]["tool calls"]["message"] == (
        "tool call c-1 (write_file) of turn 2 has no result, so the model would see a call "
        "left unanswered."
    )
    texts = dsh("doctor", "loose").stdout.splitlines()
    assert texts == [
        f"loose: permissions: the log's file {loose} has mode 644: others may read or change "
        f"it. Fix: `chmod 600 {loose}`.",
        f"loose: permissions: the log's folder {loose.parent} has mode 755: others may read or "
        f"change it. Fix: `chmod 700 {loose.parent}`.",
    ]

    damaged = corrupt.read_bytes()
    applied = dsh("doctor", "--all", "--apply")
    assert applied.returncode == 1  # corruption, permissions and the rest stay
    assert "torn: cut a torn tail of " in applied.stdout
    kept = [p for p in torn.parent.iterdir() if ".torn-" in p.name]
    assert len(kept) == 1
    assert corrupt.read_bytes() == damaged  # never touched
    assert "torn tail" not in _findings(dsh("doctor", "torn", "--json").stdout)
    assert sorted(p.name.split("-")[0] for p in (dsh.home / "backups").iterdir()) == ["torn"]


def test_doctor_usage(dsh: Sandbox) -> None:
    for args in ([], ["x", "--all"]):
        done = dsh("doctor", *args)
        assert (done.returncode, done.stderr) == (
            2,
            "dsh: error: name one session (ID) or pass --all\n",
        )
    missing = dsh("doctor", "nope")
    assert (missing.returncode, missing.stderr) == (1, 'dsh: error: session "nope" not found\n')
    assert dsh("doctor", "--all").stdout == "ok: 0 session(s) checked, nothing found\n"
