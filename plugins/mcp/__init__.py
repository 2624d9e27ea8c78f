"""Tools from MCP servers (`dsh-mcp`), on the official `mcp` SDK (see docs/mcp.md).

Config: `servers: {name: {command, args?, env?, cwd?} | {url, headers?}}`, and per server
`tools` (allow-list), `timeout_ms`, `read_only`, `start_timeout_ms`. Mounting starts every server
(concurrently), lists its tools and registers each as `mcp__<server>__<tool>`; a server that
does not start fails the row. Disposing the row stops the servers and reaps their processes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import anyio

from framework import Context
from plugins.llm import HarnessError
from plugins.session.hooks import DISPOSED
from plugins.tools import ToolsService
from plugins.tools.hooks import PRE_EXECUTE

from .config import Config, HttpServer, StdioServer
from .errors import (
    MCP_ERROR,
    MCP_INVALID_RESULT,
    MCP_SERVER_DIED,
    MCP_SERVER_UNAVAILABLE,
    MCP_START_FAILED,
    MCP_TOOL_ERROR,
    MCP_UNKNOWN_TOOL,
    McpCallError,
    McpResultError,
    McpServerDiedError,
    McpServerUnavailableError,
    McpStartError,
    McpToolError,
    McpToolListError,
)

if TYPE_CHECKING:
    from .connection import IDEMPOTENCY_META_KEY, Connection, Listing
    from .tool_lists import EVENT_TYPE
    from .tools import McpTool, tool_name

#: Names whose modules import the MCP SDK (slow to import): loaded on first use, so resolving
#: or checking a manifest row does not pay for it (docs/performance.md).
_ON_USE = {
    "IDEMPOTENCY_META_KEY": ".connection",
    "Connection": ".connection",
    "Listing": ".connection",
    "EVENT_TYPE": ".tool_lists",
    "McpTool": ".tools",
    "tool_name": ".tools",
}


def __getattr__(attribute: str) -> object:
    module = _ON_USE.get(attribute)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[attribute] = value
    return value


__all__ = [
    "EVENT_TYPE",
    "IDEMPOTENCY_META_KEY",
    "MCP_ERROR",
    "MCP_INVALID_RESULT",
    "MCP_SERVER_DIED",
    "MCP_SERVER_UNAVAILABLE",
    "MCP_START_FAILED",
    "MCP_TOOL_ERROR",
    "MCP_UNKNOWN_TOOL",
    "Config",
    "Connection",
    "HttpServer",
    "Listing",
    "McpCallError",
    "McpResultError",
    "McpServerDiedError",
    "McpServerUnavailableError",
    "McpStartError",
    "McpTool",
    "McpToolError",
    "McpToolListError",
    "StdioServer",
    "aliases",
    "apply",
    "inject",
    "name",
    "tool_name",
]

name = "mcp"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-mcp"]
inject = ["tools"]


async def apply(ctx: Context, config: Config) -> None:
    """Start the servers, register their tools and the `mcp/tools` recorder."""
    from .connection import Connection
    from .tool_lists import ToolListRecorder
    from .tools import build_tools

    connections = {
        server: Connection(ctx, server, settings) for server, settings in config.servers.items()
    }
    listings: dict[str, Listing] = {}
    errors: dict[str, McpStartError] = {}

    async def start(connection: Connection) -> None:
        try:
            listings[connection.name] = await connection.start()
        except McpStartError as error:
            errors[connection.name] = error

    async with anyio.create_task_group() as group:
        for connection in connections.values():
            group.start_soon(start, connection)
    failures = [errors[server] for server in connections if server in errors]
    if len(failures) == 1:
        raise failures[0]
    if failures:
        raise HarnessError("; ".join(str(error) for error in failures), MCP_START_FAILED)
    for server, connection in connections.items():
        for tool in build_tools(connection, listings[server].tools):
            ctx.service(ToolsService).register(tool)
    recorder = ToolListRecorder(ctx, connections.values())
    ctx.on(PRE_EXECUTE, recorder.pre_execute)
    ctx.on(DISPOSED, recorder.forget)
