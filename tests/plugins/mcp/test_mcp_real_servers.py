"""dsh-mcp against servers nobody here wrote: mcp-server-time and mcp-server-git (test extra)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import code, mounted

from plugins.mcp import McpTool

pytestmark = pytest.mark.anyio


def installed(name: str) -> str:
    path = Path(sys.executable).parent / name
    assert path.is_file(), f"{name} is not installed (pip install -e '.[test]')"
    return str(path)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


async def test_mcp_server_time_answers_a_call() -> None:
    time_server = {"command": "mcp-server-time", "args": ["--local-timezone", "Etc/UTC"]}
    async with mounted({"time": time_server}) as m:
        tool = m.root.tools.get("mcp__time__get_current_time")
        assert isinstance(tool, McpTool)
        assert tool.read_only is True  # readOnlyHint
        result = await m.call("mcp__time__get_current_time", {"timezone": "Asia/Tokyo"})
        assert not result.is_error, result.to_json()
        now: dict[str, Any] = result.value["structuredContent"]
        assert now["timezone"] == "Asia/Tokyo"
        assert now["datetime"].endswith("+09:00")
        assert '"timezone": "Asia/Tokyo"' in result.content[0]["text"]
        converted = await m.call(
            "mcp__time__convert_time",
            {"source_timezone": "Europe/London", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.value["structuredContent"]["target"]["timezone"] == "Asia/Tokyo"
        unknown = await m.call("mcp__time__get_current_time", {"timezone": "Mars/Olympus"})
        assert code(unknown) == "MCP_TOOL_ERROR"
        assert "Mars/Olympus" in unknown.content[0]["text"]


async def test_mcp_server_git_commits_in_a_temporary_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "dsh@example.invalid")
    git(repo, "config", "user.name", "dsh test")
    (repo / "a.txt").write_text("alpha\n")
    server = {"command": installed("mcp-server-git"), "args": ["--repository", str(repo)]}
    async with mounted({"git": server}) as m:
        flags = {s["name"]: m.root.tools.get(s["name"]).read_only for s in m.root.tools.schemas()}
        assert flags["mcp__git__git_status"] is True
        assert flags["mcp__git__git_commit"] is False
        assert flags["mcp__git__git_add"] is False
        status = await m.call("mcp__git__git_status", {"repo_path": str(repo)})
        assert "a.txt" in status.content[0]["text"]
        added = await m.call("mcp__git__git_add", {"repo_path": str(repo), "files": ["a.txt"]})
        assert not added.is_error, added.to_json()
        commit = await m.call(
            "mcp__git__git_commit", {"repo_path": str(repo), "message": "first from dsh"}
        )
        assert not commit.is_error, commit.to_json()
        assert git(repo, "log", "--format=%s") == "first from dsh\n"
        # Nothing staged now: the server's own refusal reaches the model as a failed result.
        again = await m.call(
            "mcp__git__git_commit", {"repo_path": str(repo), "message": "first from dsh"}
        )
        assert code(again) == "MCP_TOOL_ERROR"
        assert "No changes staged" in again.content[0]["text"]
        outside = await m.call("mcp__git__git_status", {"repo_path": str(tmp_path)})
        assert outside.is_error
        # `git_log`'s `anyOf: [string, null]` parameters became `oneOf`, so null passes here.
        log = await m.call("mcp__git__git_log", {"repo_path": str(repo), "start_timestamp": None})
        assert "first from dsh" in log.content[0]["text"]
    assert git(repo, "log", "--format=%s") == "first from dsh\n"
