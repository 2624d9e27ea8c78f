"""`dsh run --json` and a library consumer of `agents.open` + `agents.stream` see the same turn.

The same replay script runs twice: once through the `dsh` command, once in-process through the
library. The command's JSON lines must equal the library items written down by hand here (not
through the CLI's own view), so the two cannot drift apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dsh_sandbox import Sandbox

from framework import boot
from plugins.agent import (
    Opened,
    ReasoningDelta,
    RunResult,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnEnd,
)

pytestmark = pytest.mark.anyio

APP = Path(__file__).resolve().parents[2] / "config" / "app.yml"

SCRIPT = """\
      - reasoning: Look before writing anything.
        text: Checking the workspace.
        tool_calls:
          - {id: look-1, name: list_files, arguments: {path: .}}
          - {id: look-2, name: read_file, arguments: {path: missing.txt}}
          - {id: look-3, name: read_file, arguments: {path: a.txt}}
      - text: There is one file and no missing.txt.
"""


def expected_lines(opened: Opened, items: list[StreamItem], stored: bool) -> list[Any]:
    """What a library user would print for the turn, in the shape of `dsh run --json`."""
    lines: list[Any] = [{"type": "session", "sessionId": opened.session_id, "resumed": False}]
    result: RunResult | None = None
    for item in items:
        if isinstance(item, TextDelta):
            lines.append({"type": "text", "text": item.text})
        elif isinstance(item, ReasoningDelta):
            lines.append({"type": "reasoning", "text": item.text})
        elif isinstance(item, ToolCall):
            lines.append(
                {
                    "type": "tool-call",
                    "callId": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments,
                }
            )
        elif isinstance(item, ToolResult):
            try:
                value = json.loads(item.text)
            except ValueError:
                value = item.text
            line = {
                "type": "tool-result",
                "callId": item.call_id,
                "name": item.name,
                "isError": item.is_error,
                "value": value,
            }
            if item.error is not None:
                line["error"] = item.error
            lines.append(line)
        elif isinstance(item, TurnEnd):
            result = item.result
    assert result is not None
    lines.append(
        {
            "type": "result",
            "sessionId": result.session_id,
            "stored": stored,
            "output": result.text,
            "reason": result.reason,
        }
    )
    return lines


async def test_dsh_run_json_shows_what_the_library_stream_yields(
    dsh: Sandbox, replay_overlay: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = replay_overlay("parity.yml", SCRIPT)
    dsh.workspace.mkdir()
    (dsh.workspace / "a.txt").write_text("alpha\n")
    ran = dsh("run", "--json", "--patch", overlay, "--session", "s-parity", "What is here?")
    assert ran.returncode == 0, ran.stderr
    printed = [json.loads(line) for line in ran.stdout.splitlines()]

    for name, value in dsh.env().items():
        if name.startswith("DSH_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("DSH_HOME", str(dsh.root / "library-home"))
    async with boot(APP, [overlay]) as ctx:
        opened = await ctx.agents.open("s-parity")
        items = [
            item
            async for item in ctx.agents.stream("What is here?", session="s-parity", progress=True)
        ]
        stored = await ctx.sessionPersistence.read_from("s-parity", 0)
        await opened.dispose()

    assert printed == expected_lines(opened, items, stored=bool(stored))
    kinds = [line["type"] for line in printed]
    assert kinds.count("tool-result") == 3
    errors = [line for line in printed if line["type"] == "tool-result" and line["isError"]]
    assert len(errors) == 1  # the missing file
    assert printed[-1]["reason"] == {"kind": "completed"}
