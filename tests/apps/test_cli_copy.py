"""`dsh copy` between JSONL, SQLite and PostgreSQL: the original harness's logs go through every
ordered pair of backends and read back as the same JSON text, event for event."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import anyio
import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import Backend, _build, make_backend, tool_turn
from postgres_support import postgres_fixture

from plugins.session.jsonutil import dumps
from plugins.session_persistence.testing import (
    FIXTURE_NAMES,
    FIXTURES,
    T0,
    open_tool_turn,
    read_fixture,
    running,
)

postgres = postgres_fixture()

APP = Path(__file__).parents[2] / "config" / "app.yml"
PAIRS = [
    pytest.param(a, b, marks=[pytest.mark.postgres] if "postgres" in (a, b) else [])
    for a, b in itertools.permutations(["jsonl", "sqlite", "postgres"], 2)
]


def _side(backend: Backend) -> Path:
    """What `--from` / `--to` take: the JSONL default manifest, or the backend's overlay."""
    return APP if backend.overlay is None else backend.overlay


def _stored(backend: Backend) -> dict[str, list[str]]:
    """Every stored session's events as JSON text, read in this process."""

    async def read() -> dict[str, list[str]]:
        async with running(_build(backend.factory, backend.kwargs)) as w:
            return {
                header["id"]: [dumps(e) for e in await w.service.read_from(header["id"], 0)]
                for header in await w.service.list()
            }

    return anyio.run(read)


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_the_original_logs_copy_losslessly(
    dsh: Sandbox, request: pytest.FixtureRequest, source: str, target: str
) -> None:
    a, b = make_backend(source, dsh, request), make_backend(target, dsh, request)
    expected = {}
    for name in FIXTURE_NAMES:
        header, events = read_fixture(FIXTURES / name)
        a.seed(header["id"], events, header["cwd"], header["createdAt"])
        expected[header["id"]] = [dumps(e) for e in events]
    done = dsh("copy", "--from", _side(a), "--to", _side(b), "--all", "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert {line["sessionId"]: line["events"] for line in lines} == {
        key: len(value) for key, value in expected.items()
    }
    assert _stored(b) == expected
    assert _stored(a) == expected  # the source is unchanged


def test_copy_refuses_what_it_cannot_copy_faithfully(
    dsh: Sandbox, request: pytest.FixtureRequest
) -> None:
    jsonl, sqlite = make_backend("jsonl", dsh, request), make_backend("sqlite", dsh, request)
    jsonl.seed("one", tool_turn(0, 1, []), str(dsh.root), T0)
    jsonl.seed("two", tool_turn(0, 1, []), str(dsh.root), T0 + 1)
    sqlite.seed("two", tool_turn(0, 1, []), str(dsh.root), T0)
    with jsonl.hold(dsh.env(), "live", open_tool_turn(0, started=True)):
        done = dsh("copy", "--from", APP, "--to", _side(sqlite), "one", "two", "live", "nope")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "copied one (6 events)"
    assert lines[1].startswith('not copied two: session "two" already has a persisted log')
    assert lines[2].startswith("not copied live: running (pid ")
    assert lines[3] == 'not copied nope: session "nope" not found'
    same = dsh("copy", "--from", APP, "--to", APP, "--all")
    assert (same.returncode, same.stderr) == (
        2,
        "dsh: error: --from and --to name the same session storage\n",
    )
    nothing = dsh("copy", "--from", APP, "--to", _side(sqlite))
    assert nothing.returncode == 2
    assert "name the sessions to copy (ID...) or pass --all" in nothing.stderr
