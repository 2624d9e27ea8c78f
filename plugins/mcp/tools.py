"""MCP tools as `Tool`s of the tools service: naming, schemas, read-only marks, results.

A server's tool `<tool>` is registered as `mcp__<server>__<tool>`. Its body forwards the call
(with the durable idempotency key in `_meta`) and returns `{"content": [MCP blocks],
"structuredContent"?}`; the model sees the text of the blocks. An `isError` result becomes a
failed result carrying the tool's own text (see docs/mcp.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp.types import Tool as RemoteTool

from plugins.session.jsonutil import dumps
from plugins.tools import Tool, ToolExecution
from plugins.tools.results import ContentBlock, text_block

from .connection import Connection
from .errors import McpToolError, McpToolListError
from .schema import to_subset

log = logging.getLogger(__name__)

PREFIX = "mcp__"


@dataclass(frozen=True, eq=False)
class McpTool(Tool):
    """A tool served by an MCP server: its `connection` and its own name there."""

    connection: Connection | None = None
    remote_name: str = ""

    @property
    def server(self) -> str:
        """The configured server name."""
        return "" if self.connection is None else self.connection.name


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `mcp__<server>__<tool>`."""
    return f"{PREFIX}{server}__{tool}"


def build_tools(connection: Connection, remote: Sequence[RemoteTool]) -> list[McpTool]:
    """The tools to register for one server's listing (after its `tools:` allow-list)."""
    server = connection.server
    offered = {tool.name for tool in remote}
    for field, names in (("tools", server.tools or ()), ("read_only", server.read_only)):
        missing = [name for name in names if name not in offered]
        if missing:
            raise McpToolListError(connection.name, field, missing, offered)
    allowed = None if server.tools is None else set(server.tools)
    declared = set(server.read_only)
    built = []
    for tool in remote:
        if allowed is not None and tool.name not in allowed:
            continue
        parameters, relaxed = to_subset(tool.input_schema)
        if relaxed:
            log.debug(
                'MCP tool "%s" of server "%s": relaxed schema keywords %s',
                tool.name,
                connection.name,
                ", ".join(relaxed),
            )
        hint = tool.annotations is not None and tool.annotations.read_only_hint is True
        read_only = tool.name in declared or hint
        built.append(
            McpTool(
                name=tool_name(connection.name, tool.name),
                description=_description(tool),
                parameters=parameters,
                execute=_body(connection, tool.name),
                render=render,
                timeout_ms=server.timeout_ms,
                is_concurrency_safe=read_only,
                read_only=read_only,
                connection=connection,
                remote_name=tool.name,
            )
        )
    return built


def _description(tool: RemoteTool) -> str:
    if tool.description:
        return tool.description
    title = tool.title or (tool.annotations.title if tool.annotations is not None else None)
    return title or ""


def _body(connection: Connection, remote_name: str) -> Any:
    async def execute(args: Any, exec: ToolExecution) -> dict[str, Any]:
        if not isinstance(args, dict):
            raise TypeError("MCP tool arguments must be a JSON object")
        result = await connection.call(remote_name, args, exec.idempotency_key, exec.signal)
        blocks = [
            block.model_dump(by_alias=True, mode="json", exclude_none=True)
            for block in result.content
        ]
        if result.is_error:
            text = "\n".join(block["text"] for block in text_blocks(blocks))
            raise McpToolError(text or "the tool reported an error without a message")
        value: dict[str, Any] = {"content": blocks}
        if result.structured_content is not None:
            value["structuredContent"] = result.structured_content
        return value

    execute.__qualname__ = f"mcp tool {remote_name}"
    return execute


def render(args: Any, value: Any) -> list[ContentBlock]:
    """The model-visible blocks: the MCP content as text (structured content if none)."""
    blocks = text_blocks(value["content"])
    if not blocks and "structuredContent" in value:
        return [text_block(dumps(value["structuredContent"]))]
    return blocks


def text_blocks(content: Sequence[dict[str, Any]]) -> list[ContentBlock]:
    """MCP content blocks as text blocks; binary content is described, not inlined."""
    return [text_block(_text_of(block)) for block in content]


def _text_of(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind} {block.get('mimeType', '?')}, about {size} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource {block.get('uri', '?')}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return str(resource["text"])
        return f"[resource {resource.get('uri', '?')}, {resource.get('mimeType', 'binary')}]"
    return f"[{kind} content]"
