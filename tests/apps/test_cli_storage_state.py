"""What `dsh show`, `dsh sessions` and `dsh resume` say about storage state: a session another
process is running (on every backend), and the bytes a repair set aside beside a JSONL log."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox
from postgres_support import PostgresTarget, postgres_fixture

from apps.cli import stored
from plugins.session_persistence import SessionNotFoundError, SessionPersistenceError
from plugins.session_persistence.testing import open_tool_turn
from plugins.session_persistence_jsonl import frames

postgres = postgres_fixture()

SQLITE = Path(__file__).parents[2] / "config" / "overlays" / "sqlite.yml"
PG_OVERLAY = """\
- id: session-persistence
  disabled: true
- insert:
    - id: session-persistence-postgres
      name: dsh-session-persistence-postgres
      config:
        dsn: {dsn}
        schema: {schema}
"""


def _backend(request: pytest.FixtureRequest, dsh: Sandbox) -> tuple[str, dict[str, str], list[str]]:
    """`(factory, kwargs, dsh patch arguments)` of the parametrized backend."""
    kind = request.param
    if kind == "jsonl":
        factory = "plugins.session_persistence_jsonl:JsonlBackend"
        return factory, {"root": str(dsh.home / "sessions")}, []
    if kind == "sqlite":
        dsh.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        factory = "plugins.session_persistence_sqlite:SqliteBackend"
        return factory, {"path": str(dsh.home / "sessions.sqlite3")}, ["--patch", str(SQLITE)]
    target: PostgresTarget = request.getfixturevalue("postgres")
    overlay = dsh.write(
        "pg.yml", PG_OVERLAY.format(dsn=json.dumps(target.dsn), schema=target.schema)
    )
    factory = "plugins.session_persistence_postgres:PostgresBackend"
    return factory, {"dsn": target.dsn, "schema": target.schema}, ["--patch", str(overlay)]


@pytest.fixture(params=["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def held(request: pytest.FixtureRequest, dsh: Sandbox) -> Iterator[tuple[int, list[str]]]:
    """A second process running session "shared" (an open turn with a started tool call);
    `(its pid, the dsh patch arguments reaching the same storage)`."""
    factory, kwargs, patches = _backend(request, dsh)
    spec = {
        "factory": factory,
        "kwargs": kwargs,
        "session": "shared",
        "cwd": str(dsh.root),
        "events": open_tool_turn(0, started=True),
    }
    command = [sys.executable, "-m", "plugins.session_persistence.testing.child", "hold"]
    child = subprocess.Popen(
        [*command, json.dumps(spec)], stdout=subprocess.PIPE, env=dsh.env(), text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        yield child.pid, patches
    finally:
        child.kill()
        child.wait()


def test_a_session_another_process_runs_is_shown_as_running(
    dsh: Sandbox, held: tuple[int, list[str]]
) -> None:
    pid, patches = held
    host = socket.gethostname()
    shown = dsh("show", "shared", *patches)
    assert shown.returncode == 0, shown.stderr
    assert f"● running in pid {pid} on host {host}" in shown.stdout
    assert "pending repair" not in shown.stdout
    assert "interrupted" not in shown.stdout
    listed = dsh("sessions", "--json", *patches)
    assert listed.returncode == 0, listed.stderr
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["running"] == {"pid": pid, "host": host}
    assert row["lastReason"] is None
    assert row["events"] == len(open_tool_turn(0, started=True))
    table = dsh("sessions", *patches)
    assert f"running (pid {pid} on host {host})" in table.stdout


def _torn_log(dsh: Sandbox) -> Path:
    """Run one session to completion, then give the first block of the log's last frame (the
    batch holding the final `turn/end`) a size past the end of the file."""
    assert dsh("run", "--session", "torn", "write a haiku").returncode == 0
    (log,) = (dsh.home / "sessions").glob("*/torn/session.jsonl.zstd")
    data = bytearray(log.read_bytes())
    start = frames.scan(bytes(data))[-1].start
    descriptor = data[start + 4]
    assert descriptor & 0x23 == 0x20  # single segment, no dictionary id: what we write
    at = start + 5 + ((0, 2, 4, 8)[descriptor >> 6] or 1)
    header = int.from_bytes(data[at : at + 3], "little") + (4096 << 3)
    data[at : at + 3] = header.to_bytes(3, "little")
    log.write_bytes(bytes(data))
    return log


def test_show_and_resume_say_what_a_repair_set_aside(dsh: Sandbox) -> None:
    log = _torn_log(dsh)
    shown = dsh("show", "torn")
    assert shown.returncode == 0, shown.stderr
    assert "⚠ the log ends in a torn tail of " in shown.stdout
    assert f"{log}.torn-<ms>" in shown.stdout
    resumed = dsh("resume", "torn", "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout.splitlines()[-1])
    (kept,) = report["setAside"]
    assert Path(kept["path"]).parent == log.parent
    assert Path(kept["path"]).name.startswith("session.jsonl.zstd.torn-")
    assert Path(kept["path"]).stat().st_size == kept["bytes"] > 0
    human = dsh("show", "torn")
    assert f"set aside by a repair: {kept['bytes']} bytes in {kept['path']}" in human.stdout


def test_resume_with_a_prompt_says_what_its_repair_set_aside(dsh: Sandbox) -> None:
    log = _torn_log(dsh)
    resumed = dsh("resume", "torn", "continue")
    (kept,) = log.parent.glob("session.jsonl.zstd.torn-*")
    assert (
        f"set aside: {kept.stat().st_size} bytes cut from the log's torn tail, kept in {kept}"
        in resumed.stdout + resumed.stderr
    )


class _Persistence:
    """A `ctx` whose `sessionPersistence.read_from` raises `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def get(self, key: str) -> _Persistence:
        return self

    async def read_from(self, session_id: str, from_seq: int) -> list[object]:
        raise self.error


@pytest.mark.anyio
async def test_the_cli_tells_not_found_by_its_type_not_its_text() -> None:
    found = await stored.stored_events(_Persistence(SessionNotFoundError("another id")), "x")  # type: ignore[arg-type]
    assert found is None
    look_alike = SessionPersistenceError('session "x" not found')
    with pytest.raises(SessionPersistenceError):
        await stored.stored_events(_Persistence(look_alike), "x")  # type: ignore[arg-type]
