"""Demo tools (docs/security.md): workspace confinement, file tools, the idempotent ledger."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.demo_tools as demo_tools
import plugins.tools as tools_plugin
from framework import AbortController, Context
from plugins.tools import ToolExecutionInput, ToolExecutionResult

pytestmark = pytest.mark.anyio


def failure(message: str, name: str, code: str) -> dict[str, Any]:
    return {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {message}"}],
        "error": {"message": message, "info": {"name": name, "code": code}},
    }


def outside(path: str) -> dict[str, Any]:
    return failure(
        f'path "{path}" is outside the workspace',
        "PathOutsideWorkspaceError",
        "PATH_OUTSIDE_WORKSPACE",
    )


def not_found(path: str) -> dict[str, Any]:
    return failure(f"file not found: {path}", "NotFoundError", "NOT_FOUND")


@pytest.fixture
def space(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("hello world", encoding="utf-8")
    (root / "b.txt").write_text("bee", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return root


class Harness:
    def __init__(self, root: Context) -> None:
        self.root = root

    async def run(
        self, name: str, args: Any, call_id: str = "call-1", key: str | None = None
    ) -> ToolExecutionResult:
        signal = AbortController().signal
        result: ToolExecutionResult = await self.root.tools.execute(
            ToolExecutionInput(call_id, name, args, signal, idempotency_key=key)
        )
        return result


@asynccontextmanager
async def mounted(space: Path, **config: Any) -> AsyncIterator[Harness]:
    config.setdefault("ledger_path", str(space.parent / "ledger" / "ledger.jsonl"))
    async with Context() as root:
        await root.plugin(tools_plugin)
        await root.plugin(demo_tools, {"workspace": str(space), **config})
        yield Harness(root)


def test_default_ledger_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "home"))
    assert demo_tools.default_ledger_path() == str(tmp_path / "home" / "ledger.jsonl")
    monkeypatch.delenv("DSH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert demo_tools.default_ledger_path() == str(tmp_path / ".dsh" / "ledger.jsonl")


def test_config_defaults_and_limits() -> None:
    config = demo_tools.Config()
    assert (config.workspace, config.ledger_path, config.max_read_bytes) == (None, None, 65536)
    with pytest.raises(ValueError, match="greater than 0"):
        demo_tools.Config(max_read_bytes=0)
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        demo_tools.Config(workspace_dir="x")  # type: ignore[call-arg]


async def test_registration_and_modes(space: Path) -> None:
    async with mounted(space) as h:
        tools = h.root.tools
        names = [schema["name"] for schema in tools.schemas()]
        assert names == [
            "read_file",
            "list_files",
            "write_file",
            "append_ledger",
            "find_ledger_entry",
            "sleep_then_write",
        ]
        modes = {name: tools.execution_mode(name, {}) for name in names}
    assert modes == {
        "read_file": "parallel",
        "list_files": "parallel",
        "write_file": "exclusive",
        "append_ledger": "exclusive",
        "find_ledger_entry": "exclusive",
        "sleep_then_write": "exclusive",
    }


async def test_workspace_defaults_to_the_current_directory(
    space: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(space)
    async with Context() as root:
        await root.plugin(tools_plugin)
        await root.plugin(demo_tools, {"ledger_path": str(space.parent / "l.jsonl")})
        result = await Harness(root).run("read_file", {"path": "b.txt"})
    assert result.value == "bee"


async def test_read_file(space: Path) -> None:
    async with mounted(space, max_read_bytes=5) as h:
        whole = await h.run("read_file", {"path": "b.txt"})
        cut = await h.run("read_file", {"path": "docs/./a.txt"})
        missing = await h.run("read_file", {"path": "docs/none.txt"})
        folder = await h.run("read_file", {"path": "docs"})
    assert whole.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": "bee"}],
        "value": "bee",
    }
    assert cut.value == "hello\n[truncated at 5 bytes]"
    assert missing.to_json() == not_found("docs/none.txt")
    assert folder.error is not None
    assert folder.error.message == 'path "docs" is a directory'


async def test_list_files(space: Path) -> None:
    (space / "docs" / "z").mkdir()
    async with mounted(space) as h:
        top = await h.run("list_files", {})
        docs = await h.run("list_files", {"path": "docs"})
        missing = await h.run("list_files", {"path": "nope"})
        file = await h.run("list_files", {"path": "b.txt"})
    assert top.value == ["b.txt", "docs/"]
    assert top.content == [{"type": "text", "text": '["b.txt","docs/"]'}]
    assert docs.value == ["a.txt", "z/"]
    assert missing.to_json() == not_found("nope")
    assert file.error is not None
    assert file.error.message == 'path "b.txt" is not a directory'


@pytest.mark.parametrize("tool", ["read_file", "list_files", "write_file"])
async def test_paths_are_confined_to_the_workspace(space: Path, tool: str) -> None:
    outer = space.parent
    (space / "escape").symlink_to(outer)
    (space / "secret-link.txt").symlink_to(outer / "secret.txt")
    paths = ["../secret.txt", "docs/../../secret.txt", str(outer / "secret.txt"), "/etc/passwd"]
    paths += ["escape/secret.txt", "secret-link.txt", "escape"]
    async with mounted(space) as h:
        for path in paths:
            args = (
                {"path": path, "content": "overwritten"} if tool == "write_file" else {"path": path}
            )
            assert (await h.run(tool, args)).to_json() == outside(path), path
    assert (outer / "secret.txt").read_text(encoding="utf-8") == "top secret"


async def test_symlinks_inside_the_workspace_are_followed(space: Path) -> None:
    (space / "alias").symlink_to(space / "docs")
    async with mounted(space) as h:
        result = await h.run("read_file", {"path": "alias/a.txt"})
    assert result.value == "hello world"


async def test_write_file_is_atomic_and_reports_bytes(space: Path) -> None:
    async with mounted(space) as h:
        created = await h.run("write_file", {"path": "new/deep/n.txt", "content": "héllo"})
        replaced = await h.run("write_file", {"path": "b.txt", "content": ""})
        read_back = await h.run("read_file", {"path": "new/deep/n.txt"})
        onto_folder = await h.run("write_file", {"path": "docs", "content": "x"})
    assert created.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": '{"path":"new/deep/n.txt","bytes":6}'}],
        "value": {"path": "new/deep/n.txt", "bytes": 6},
    }
    assert replaced.value == {"path": "b.txt", "bytes": 0}
    assert (space / "b.txt").read_text(encoding="utf-8") == ""
    assert read_back.value == "héllo"
    assert onto_folder.error is not None
    assert onto_folder.error.message == 'path "docs" is a directory'
    leftovers = [name for _, _, files in os.walk(space) for name in files if name.endswith(".tmp")]
    assert leftovers == []


def ledger_lines(space: Path) -> list[Any]:
    text = (space.parent / "ledger" / "ledger.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


async def test_append_ledger_is_idempotent_per_idempotency_key(space: Path) -> None:
    async with mounted(space) as h:
        first = await h.run("append_ledger", {"entry": {"paid": 10}}, "call-a", key="key-a")
        again = await h.run("append_ledger", {"entry": {"paid": 99}}, "call-a", key="key-a")
        # The same call id in another session (another key) is another call.
        other = await h.run("append_ledger", {"entry": "note"}, "call-a", key="key-b")
        found = await h.run("find_ledger_entry", {"key": "key-a"})
        absent = await h.run("find_ledger_entry", {"key": "call-a"})
    assert first.value == {"status": "appended", "key": "key-a"}
    assert again.value == {"status": "duplicate", "key": "key-a"}
    assert other.value == {"status": "appended", "key": "key-b"}
    lines = ledger_lines(space)
    assert [(line["key"], line["entry"]) for line in lines] == [
        ("key-a", {"paid": 10}),
        ("key-b", "note"),
    ]
    assert all(list(line) == ["key", "entry", "at"] for line in lines)
    assert isinstance(lines[0]["at"], int)
    assert found.value == lines[0]
    ledger = space.parent / "ledger" / "ledger.jsonl"
    assert ledger.stat().st_mode & 0o777 == 0o600
    assert absent.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": "null"}],
        "value": None,
    }


async def test_find_before_any_append(space: Path) -> None:
    async with mounted(space) as h:
        result = await h.run("find_ledger_entry", {"key": "k"})
    assert result.value is None


async def test_concurrent_duplicates_append_once(space: Path) -> None:
    results: list[Any] = []
    async with mounted(space) as h:

        async def append(n: int) -> None:
            result = await h.run("append_ledger", {"entry": n}, key="same")
            results.append(result.value["status"])

        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(append, n)
    assert sorted(results) == ["appended"] + ["duplicate"] * 7
    assert len(ledger_lines(space)) == 1


async def test_a_torn_last_line_is_skipped_and_terminated(space: Path) -> None:
    ledger = space.parent / "ledger" / "ledger.jsonl"
    ledger.parent.mkdir()
    ledger.write_text('{"key":"old","entry":1,"at":0}\n{"key":"torn","ent', encoding="utf-8")
    async with mounted(space) as h:
        torn = await h.run("append_ledger", {"entry": 2}, key="torn")
        found = await h.run("find_ledger_entry", {"key": "old"})
    assert torn.value == {"status": "appended", "key": "torn"}
    assert found.value == {"key": "old", "entry": 1, "at": 0}
    lines = ledger.read_text(encoding="utf-8").splitlines()
    assert lines[1] == '{"key":"torn","ent'
    assert json.loads(lines[2])["key"] == "torn"
