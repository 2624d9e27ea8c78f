"""`dsh` with MCP servers: the mcp-time overlay offline, `dsh tools`, boot errors, and a SIGKILL
of `dsh run` while mcp-server-git commits (the resumed session says the outcome is unknown)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from dsh_sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
MCP_TESTS = REPO / "tests" / "plugins" / "mcp"
TIME_OVERLAY = REPO / "config" / "overlays" / "mcp-time.yml"
PROXY = MCP_TESTS / "slow_proxy.py"
TOY = MCP_TESTS / "toy_server.py"

sys.path.insert(0, str(MCP_TESTS))
from mcp_helpers import free_port, http_toy  # noqa: E402 - the MCP tests folder, added above


def _events(dsh: Sandbox, session_id: str) -> list[dict[str, Any]]:
    shown = dsh("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children_of(root: Path) -> list[int]:
    """Live processes whose working directory is `root` (dsh's and its servers')."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == str(root) and _alive(int(entry)):
                found.append(int(entry))
        except OSError:
            continue
    return found


def _server(name: str) -> str:
    beside = Path(sys.executable).parent / name
    assert beside.is_file(), f"{name} is not installed (pip install -e '.[test]')"
    return str(beside)


def test_the_mcp_time_overlay_runs_offline(dsh: Sandbox) -> None:
    result = dsh("run", "--patch", TIME_OVERLAY, "--session", "s-time", "What time is it in Tokyo?")
    assert result.returncode == 0, result.stderr
    # The answer goes to stdout; the progress (tool calls and results) to stderr.
    assert result.stdout.startswith("The time server answered")
    assert '→ mcp__time__get_current_time {"timezone":"Asia/Tokyo"}' in result.stderr
    assert '"timezone": "Asia/Tokyo"' in result.stderr
    assert "+09:00" in result.stderr
    assert "✓ completed" in result.stderr
    # The server was stopped with the run: nothing started by dsh outlives it.
    assert _children_of(dsh.root) == []

    events = _events(dsh, "s-time")
    (record,) = [event for event in events if event["type"] == "mcp/tools"]
    assert record["ignorable"] is True
    assert record["data"]["server"] == "time"
    assert record["data"]["turn"] == 1
    assert {tool["name"] for tool in record["data"]["tools"]} == {
        "get_current_time",
        "convert_time",
    }
    (call,) = [event for event in events if event["type"] == "tool/call"]
    (answer,) = [event for event in events if event["type"] == "tool/result"]
    assert call["seq"] < record["seq"] < answer["seq"]
    assert "error" not in answer["data"]


def test_dsh_tools_lists_every_tool_with_its_source(dsh: Sandbox) -> None:
    listed = dsh("tools", "--patch", TIME_OVERLAY, "--json")
    assert listed.returncode == 0, listed.stderr
    tools = {line["name"]: line for line in map(json.loads, listed.stdout.splitlines())}
    assert list(tools) == sorted(tools)
    mcp_tools = {name for name, info in tools.items() if info["source"]["kind"] == "mcp"}
    assert mcp_tools == {"mcp__time__convert_time", "mcp__time__get_current_time"}
    # Every other tool of the default app comes from the demo tools plugin.
    assert {"write_file", "read_file", "append_ledger"} <= set(tools)
    for name in set(tools) - mcp_tools:
        assert tools[name]["source"] == {"kind": "plugin", "plugin": "demo-tools"}, name
    assert tools["write_file"]["readOnly"] is False
    current = tools["mcp__time__get_current_time"]
    assert current["source"] == {
        "kind": "mcp",
        "server": "time",
        "tool": "get_current_time",
        "plugin": "mcp",
    }
    assert current["readOnly"] is True  # from the server's readOnlyHint
    assert current["parameters"]["required"] == ["timezone"]
    assert current["description"] == "Get current time in a specific timezone"

    table = dsh("tools", "--patch", TIME_OVERLAY)
    assert table.returncode == 0, table.stderr
    line = next(row for row in table.stdout.splitlines() if "get_current_time " in row)
    assert "mcp server time (get_current_time)" in line
    assert " yes " in line
    assert _children_of(dsh.root) == []


def test_a_missing_command_is_a_check_and_boot_error(dsh: Sandbox) -> None:
    overlay = dsh.write(
        "missing.yml",
        "- insert:\n"
        "    - id: mcp\n"
        "      name: dsh-mcp\n"
        "      config:\n"
        "        servers:\n"
        "          gone:\n"
        "            command: dsh-no-such-mcp-server\n",
    )
    message = (
        'MCP server command "dsh-no-such-mcp-server" was not found (looked on PATH and beside '
        "the running Python)"
    )
    checked = dsh("check", "--patch", overlay)
    assert checked.returncode == 2
    (line,) = checked.stdout.splitlines()
    assert line.startswith(f"{overlay}:5:9: invalid config for entry mcp")
    assert message in line
    run = dsh("run", "--patch", overlay, "hi")
    assert run.returncode == 2
    (error,) = [line for line in run.stderr.splitlines() if line.startswith("dsh: error: ")]
    assert error.startswith("dsh: error: failed to boot ")
    assert message in error
    assert "Traceback" not in run.stderr


def test_a_server_that_does_not_start_is_a_boot_error(dsh: Sandbox) -> None:
    overlay = dsh.write(
        "refuses.yml",
        "- insert:\n"
        "    - id: mcp\n"
        "      name: dsh-mcp\n"
        "      config:\n"
        "        servers:\n"
        "          toy:\n"
        f"            command: {sys.executable}\n"
        f"            args: [{TOY}, --exit-on-start]\n",
    )
    run = dsh("run", "--patch", overlay, "hi")
    assert run.returncode == 2
    (error,) = [line for line in run.stderr.splitlines() if line.startswith("dsh: error: ")]
    assert error.startswith("dsh: error: failed to boot ")
    assert error.endswith(
        'MCP server "toy" did not start: the server closed the connection during the handshake; '
        "its stderr ends with: toy server: refusing to start"
    )


GIT_OVERLAY = """\
- insert:
    - id: mcp
      name: dsh-mcp
      config:
        servers:
          git:
            command: {python}
            args: [{proxy}, --hold, git_commit, --state, {state},
                   --, {server}, --repository, {repo}]
            cwd: {repo}
- id: model
  config:
    provider: replay
    model: replay
    responses:
{responses}
"""
#: The first run commits (the proxy withholds the answer, then the run is killed).
COMMIT = """      - tool_calls:
          - id: call-commit
            name: mcp__git__git_commit
            arguments: {{repo_path: {repo}, message: "dsh: record the notes"}}
      - text: never reached
"""
#: The resumed run (the replay cursor starts again per process) verifies instead of retrying.
VERIFY = """      - tool_calls:
          - id: call-check
            name: mcp__git__git_log
            arguments: {{repo_path: {repo}, max_count: 5}}
      - text: The commit is in the log, so it must not be made again.
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.mark.slow
def test_sigkill_while_mcp_server_git_commits_resumes_as_outcome_unknown(dsh: Sandbox) -> None:
    repo = dsh.root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "dsh@example.invalid")
    _git(repo, "config", "user.name", "dsh test")
    (repo / "notes.txt").write_text("durable notes\n")
    _git(repo, "add", "notes.txt")
    state = dsh.root / "proxy"
    state.mkdir()
    fields = {
        "python": sys.executable,
        "proxy": PROXY,
        "state": state,
        "server": _server("mcp-server-git"),
        "repo": repo,
    }
    overlay, verify = (
        dsh.write(name, GIT_OVERLAY.format(responses=script.format(repo=repo), **fields))
        for name, script in (("git.yml", COMMIT), ("verify.yml", VERIFY))
    )
    tools = dsh("tools", "--patch", overlay, "--json")
    assert tools.returncode == 0, tools.stderr
    listed = {line["name"]: line for line in map(json.loads, tools.stdout.splitlines())}
    assert listed["mcp__git__git_commit"]["readOnly"] is False
    assert listed["mcp__git__git_log"]["readOnly"] is True

    run = dsh.start(
        "run",
        "--patch",
        overlay,
        "--session",
        "s-git",
        "Commit the notes.",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    answered = state / "git_commit.answered"
    try:
        deadline = time.monotonic() + 60
        while not answered.exists():
            assert run.poll() is None, "dsh run exited early"
            assert time.monotonic() < deadline, "the commit was never answered"
            time.sleep(0.02)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    # The side effect happened: the server committed before the run died.
    assert _git(repo, "log", "--format=%s") == "dsh: record the notes\n"
    # The proxy and the real server saw their stdin close and ended: no orphans.
    proxy_pid = int((state / "proxy.pid").read_text())
    server_pid = int((state / "server.pid").read_text())
    deadline = time.monotonic() + 30
    while _children_of(repo) or _children_of(dsh.root):
        assert time.monotonic() < deadline, "MCP server processes outlived dsh run"
        time.sleep(0.05)
    assert not _alive(proxy_pid)
    assert not _alive(server_pid)

    shown = dsh("show", "s-git")
    assert "mcp__git__git_commit: outcome UNKNOWN (crash repair)" in shown.stdout

    resumed = dsh("resume", "s-git", "Did the commit happen?", "--patch", verify)
    assert resumed.returncode == 0, resumed.stderr
    events = _events(dsh, "s-git")
    (closer,) = [
        event
        for event in events
        if event["type"] == "tool/result"
        and event["data"]["message"]["source"]["callId"] == "call-commit"
    ]
    assert closer["data"]["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    text = closer["data"]["message"]["content"][0]["content"][0]["text"]
    assert "Do not retry blindly." in text
    # The harness never re-sent the commit: one tool/call for it, and still one commit.
    calls = [event["data"]["name"] for event in events if event["type"] == "tool/call"]
    assert calls == ["mcp__git__git_commit", "mcp__git__git_log"]
    assert _git(repo, "log", "--format=%s") == "dsh: record the notes\n"
    (checked,) = [
        event
        for event in events
        if event["type"] == "tool/result"
        and event["data"]["message"]["source"]["callId"] == "call-check"
    ]
    assert "dsh: record the notes" in json.dumps(checked["data"]["message"])


def test_the_mcp_git_example_overlay_reports_the_status(dsh: Sandbox) -> None:
    repo = dsh.root / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "draft.txt").write_text("work in progress\n")
    overlay = REPO / "config" / "overlays" / "mcp-git.yml"
    env = {"DSH_GIT_REPO": str(repo)}
    checked = dsh("check", "--patch", overlay, env=env)
    assert checked.returncode == 0, checked.stdout
    result = dsh("run", "--patch", overlay, "What changed?", env=env)
    assert result.returncode == 0, result.stderr
    assert "→ mcp__git__git_status" in result.stderr
    assert "draft.txt" in result.stderr
    listed = dsh("tools", "--patch", overlay, "--json", env=env)
    tools = {line["name"]: line for line in map(json.loads, listed.stdout.splitlines())}
    git_tools = {name: info["readOnly"] for name, info in tools.items() if "__git__" in name}
    assert git_tools == {
        "mcp__git__git_add": False,
        "mcp__git__git_commit": False,
        "mcp__git__git_diff_staged": True,
        "mcp__git__git_diff_unstaged": True,
        "mcp__git__git_log": True,
        "mcp__git__git_show": True,
        "mcp__git__git_status": True,
    }


def test_dsh_does_not_import_the_mcp_sdk_unless_a_row_mounts_it() -> None:
    # The SDK takes most of a second to import; `dsh sessions` must stay quick to start.
    probe = "import sys, apps.cli.commands; print(sorted(m for m in sys.modules if m == 'mcp'))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert result.stdout == "[]\n"


def test_ctrl_c_during_an_mcp_call_cancels_it_on_the_server(dsh: Sandbox) -> None:
    state = dsh.root / "toy"
    state.mkdir()
    overlay = dsh.write(
        "slow.yml",
        "- insert:\n"
        "    - id: mcp\n"
        "      name: dsh-mcp\n"
        "      config:\n"
        "        servers:\n"
        "          toy:\n"
        f"            command: {sys.executable}\n"
        f"            args: [{TOY}, --state, {state}]\n"
        "- id: model\n"
        "  config:\n"
        "    provider: replay\n"
        "    model: replay\n"
        "    responses:\n"
        "      - tool_calls:\n"
        "          - id: call-slow\n"
        "            name: mcp__toy__slow\n"
        "            arguments: {seconds: 60}\n"
        "      - text: never reached\n",
    )
    run = dsh.start(
        "run",
        "--patch",
        overlay,
        "--session",
        "s-int",
        "wait",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (state / "slow.started").exists():
        assert run.poll() is None, "dsh run exited early"
        assert time.monotonic() < deadline, "the slow tool never started"
        time.sleep(0.02)
    run.send_signal(signal.SIGINT)
    _out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "Traceback" not in err
    # The client sent notifications/cancelled: the server interrupted the tool.
    assert (state / "slow.cancelled").exists()
    assert _children_of(dsh.root) == []
    events = _events(dsh, "s-int")
    (result,) = [event for event in events if event["type"] == "tool/result"]
    assert result["data"]["error"]["code"] == "ABORTED"
    (block,) = result["data"]["message"]["content"][0]["content"]
    assert "its effects may have happened" in block["text"]
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}


@pytest.mark.slow
def test_http_headers_never_reach_output_or_session_files(dsh: Sandbox) -> None:
    secret = "Bearer dsh-secret-token-0123"
    state = dsh.root / "web"
    state.mkdir()
    with http_toy(state) as (url, _process):
        overlay = dsh.write(
            "web.yml",
            "- insert:\n"
            "    - id: mcp\n"
            "      name: dsh-mcp\n"
            "      config:\n"
            "        servers:\n"
            "          web:\n"
            f"            url: {url}\n"
            "            headers: {Authorization: '${DSH_TEST_TOKEN}'}\n"
            "- id: model\n"
            "  config:\n"
            "    provider: replay\n"
            "    model: replay\n"
            "    responses:\n"
            "      - tool_calls:\n"
            "          - {id: c1, name: mcp__web__echo, arguments: {text: hi}}\n"
            "      - text: done\n",
        )
        env = {"DSH_TEST_TOKEN": secret}
        ok = dsh("run", "--patch", overlay, "--session", "s-web", "go", env=env)
        assert ok.returncode == 0, ok.stderr
        assert "✓ mcp__web__echo: hi" in ok.stderr
    closed = dsh.write(
        "closed.yml", overlay.read_text().replace(url, f"http://127.0.0.1:{free_port()}/mcp")
    )
    down = dsh("run", "--patch", closed, "go", env=env)
    assert down.returncode == 2
    assert 'MCP server "web" did not start' in down.stderr
    for text in (
        ok.stdout,
        ok.stderr,
        down.stdout,
        down.stderr,
        dsh("show", "s-web", "--json").stdout,
    ):
        assert "dsh-secret-token" not in text
    for content in dsh.files().values():
        assert b"dsh-secret-token" not in content


MARKUP_TOOL = '''
from plugins.tools import tool

name = "markup-tools"
inject = ["tools"]


@tool(name="odd[/x]")
async def odd() -> str:
    """[/x] fix [bold red]this[/] now"""
    return "ok"


def apply(ctx, config):
    ctx.tools.register(odd)
'''


def test_tool_names_and_descriptions_are_shown_verbatim_not_as_rich_markup(
    dsh: Sandbox,
) -> None:
    # A tool's description comes from its author or from an MCP server: it is data, not markup.
    (dsh.root / "markup_tools.py").write_text(MARKUP_TOOL, "utf-8")
    overlay = dsh.write("markup.yml", "- insert:\n    - {id: markup, name: ./markup_tools.py}\n")
    table = dsh("tools", "--patch", overlay)
    assert table.returncode == 0, table.stderr
    line = next(row for row in table.stdout.splitlines() if row.startswith("odd"))
    assert line.split(None, 1)[0] == "odd[/x]"
    assert line.rstrip().endswith("[/x] fix [bold red]this[/] now")
