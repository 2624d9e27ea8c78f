"""The three runtime plugins boot from a manifest by their entry-point names."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from framework import AbortController
from framework.loader import boot
from plugins.tools import Tool, ToolExecution, ToolExecutionInput

pytestmark = pytest.mark.anyio

MANIFEST = """\
- id: demo
  name: dsh-demo-tools
  config:
    workspace: ${WS}
    ledger_path: ${WS}/../ledger.jsonl
    max_read_bytes: 4
- id: timeouts
  name: dsh-tool-timeout-policy
- id: tools
  name: dsh-tools
"""


async def test_boot_by_entry_point_names(tmp_path: Path) -> None:
    space = tmp_path / "ws"
    space.mkdir()
    (space / "f.txt").write_text("abcdef", encoding="utf-8")
    manifest = tmp_path / "app.yml"
    manifest.write_text(MANIFEST, encoding="utf-8")

    async def hang(args: object, exec: ToolExecution) -> None:
        await exec.signal.wait()

    async with boot(manifest, environ={"WS": str(space)}) as ctx:
        names = [schema["name"] for schema in ctx.tools.schemas()]
        signal = AbortController().signal
        read = await ctx.tools.execute(
            ToolExecutionInput("c1", "read_file", {"path": "f.txt"}, signal)
        )
        ctx.tools.register(
            Tool(name="hang", description="", parameters={}, execute=hang, timeout_ms=1)
        )
        with anyio.fail_after(5):
            hung = await ctx.tools.execute(ToolExecutionInput("c2", "hang", {}, signal))
    assert names == [
        "read_file",
        "list_files",
        "write_file",
        "append_ledger",
        "find_ledger_entry",
        "sleep_then_write",
    ]
    assert read.value == "abcd\n[truncated at 4 bytes]"
    assert hung.error is not None
    assert hung.error.message == "tool call timed out after 1ms"
