"""`dsh export`: the HTML page, loaded in real headless Chromium (screenshot and DOM), and the
JSONL form on every backend."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox
from lifecycle_support import KINDS, Backend, make_backend, tool_turn
from postgres_support import postgres_fixture

from plugins.session.jsonutil import dumps
from plugins.session_persistence.testing import T0, open_tool_turn

postgres = postgres_fixture()

CHROMIUM = Path("/usr/bin/chromium")
#: Turn 1 reads and writes a file; turn 2 crashed after its tool call started (not repaired).
CRASHED = tool_turn(0, 1, [("c-read", "read_file"), ("c-write", "write_file")], usage=400)
CRASHED += open_tool_turn(len(CRASHED), 2, started=True)


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, dsh: Sandbox) -> Backend:
    return make_backend(request.param, dsh, request)


def test_jsonl_export_is_the_stored_log(dsh: Sandbox, backend: Backend) -> None:
    backend.seed("s", CRASHED, str(dsh.root), T0)
    out = dsh.root / "s.jsonl"
    done = dsh("export", "s", "--jsonl", out, *backend.patches)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "type": "session",
        "version": 0,
        "id": "s",
        "createdAt": T0,
        "cwd": str(dsh.root),
        "delegationDepth": 0,
    }
    assert lines[1:] == [dumps(e) for e in CRASHED]  # stored events only: no pending repair
    usage = dsh("export", "s", *backend.patches)
    assert (usage.returncode, usage.stderr) == (
        2,
        "dsh: error: pass one of --html FILE or --jsonl FILE\n",
    )


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_html_export_renders_offline_in_chromium(dsh: Sandbox) -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            "headless Chromium is not installed (/usr/bin/chromium; apt-get install chromium)"
        )
    dsh.home.mkdir(parents=True)
    make_backend("jsonl", dsh).seed("crash", CRASHED, str(dsh.root), T0)
    page = dsh.root / "crash.html"
    done = dsh("export", "crash", "--html", page)
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert not re.search(r"""(src|href)\s*=|url\(|@import|<script|<link""", html, re.I)

    dom = _chromium(dsh.root / "profile", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr
    text = dom.stdout
    assert '<h1 id="session">session crash</h1>' in text
    assert '<section class="turn" id="turn-1"><h2>turn 1 — completed</h2>' in text
    assert '<section class="turn interrupted" id="turn-2"><h2>turn 2 — interrupted</h2>' in text
    assert text.count('class="event tool-call barrier"') == 3  # two calls of turn 1, one of 2
    assert '<div id="crash-point">⚡ crash point: the process stopped after seq 15;' in text
    repairs = re.findall(r'<div class="event ([^"]*repair[^"]*)" data-seq="(\d+)"', text)
    assert repairs == [
        ("tool-result error repair pending", "16"),
        ("other repair pending", "18"),
    ]
    assert "crash repair TOOL_OUTCOME_UNKNOWN" in text
    assert "<td>400</td><td>40</td>" in text  # token usage of turn 1

    shot = dsh.root / "crash.png"
    taken = _chromium(
        dsh.root / "profile", "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri()
    )
    assert taken.returncode == 0, taken.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_html_export_draws_barriers_only_where_the_manifest_mounts_a_policy(
    dsh: Sandbox,
) -> None:
    dsh.home.mkdir(parents=True)
    make_backend("jsonl", dsh).seed("marks", CRASHED, str(dsh.root), T0)
    overlays = Path(__file__).parents[2] / "config" / "overlays"
    pages = {}
    for name, patches in (("policy", []), ("none", ["--patch", overlays / "no-checkpoints.yml"])):
        page = dsh.root / f"{name}.html"
        done = dsh("export", "marks", "--html", page, *patches)
        assert done.returncode == 0, done.stderr
        pages[name] = page.read_text()
    assert pages["policy"].count(' barrier"') == 3 + 2 + 2  # 3 calls, 2 responses, 2 steps
    assert "checkpoint barrier of @deepseek-ai/dsh-session-checkpoint-policy" in pages["policy"]
    assert ' barrier"' not in pages["none"]
    assert "no ◆ marks: this manifest mounts no checkpoint policy" in pages["none"]
    assert 'class="event tool-call"' in pages["none"]  # the rows are there, unmarked
