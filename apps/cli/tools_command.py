"""`dsh tools`: every tool a manifest registers, where it comes from, whether it is read-only.

Booting the manifest is what registers tools, so this starts the manifest's MCP servers too (and
stops them before it returns). `--json` prints one object per tool with its parameter schema.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plugins.session.jsonutil import dumps

from .console import consoles
from .errors import OK, CliError

if TYPE_CHECKING:
    from framework import Context
    from plugins.mcp import McpTool
    from plugins.tools import Tool


@dataclass(frozen=True)
class ToolInfo:
    """One registered tool as `dsh tools` shows it."""

    name: str
    source: dict[str, Any]
    read_only: bool
    description: str
    parameters: dict[str, Any]

    @property
    def source_text(self) -> str:
        """`plugin <name>` or `mcp server <server> (<its tool name>)`."""
        if self.source["kind"] == "mcp":
            return f"mcp server {self.source['server']} ({self.source['tool']})"
        return f"plugin {self.source['plugin'] or '?'}"

    def to_json(self) -> dict[str, Any]:
        """The `--json` line."""
        return {
            "name": self.name,
            "source": self.source,
            "readOnly": self.read_only,
            "description": self.description,
            "parameters": self.parameters,
        }


def tool_infos(ctx: Context) -> list[ToolInfo]:
    """The globally registered tools of a booted manifest, by name."""
    tools = ctx.get("tools")
    if tools is None:
        raise CliError("this manifest mounts no tools service (add a row with name: dsh-tools)")
    mcp_tool = _mcp_tool_type()
    infos = []
    for schema in sorted(tools.schemas(), key=lambda s: str(s["name"])):
        tool: Tool = tools.get(schema["name"])
        plugin = tools.source(tool)
        source: dict[str, Any] = {"kind": "plugin", "plugin": plugin}
        if mcp_tool is not None and isinstance(tool, mcp_tool):
            source = {"kind": "mcp", "server": tool.server, "tool": tool.remote_name}
            source["plugin"] = plugin
        infos.append(ToolInfo(tool.name, source, tool.read_only, tool.description, tool.parameters))
    return infos


def _mcp_tool_type() -> type[McpTool] | None:
    """`McpTool` if dsh-mcp's tools module was imported (only then can MCP tools exist); the
    MCP SDK is slow to import, so `dsh` does not import it for manifests without MCP servers."""
    module = sys.modules.get("plugins.mcp.tools")
    return None if module is None else module.McpTool


def print_tools(infos: list[ToolInfo], *, json: bool) -> int:
    """The listing: one JSON object per tool, else a table (descriptions shown verbatim)."""
    if json:
        for info in infos:
            print(dumps(info.to_json()))
        return OK
    if not infos:
        consoles().deco.print("no tools registered")
        return OK
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False)
    for column in ("tool", "source", "read-only", "description"):
        table.add_column(column)
    for info in infos:
        summary = info.description.strip().splitlines()[0] if info.description.strip() else ""
        cells = (info.name, info.source_text, "yes" if info.read_only else "no", summary)
        table.add_row(*(Text(cell) for cell in cells))  # descriptions are not rich markup
    consoles().out.print(table)
    return OK
