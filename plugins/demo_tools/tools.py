"""The demo tools: workspace file access and the idempotent ledger (docs/security.md)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from plugins.tools import Tool, ToolExecution

from .ledger import Ledger, ledger_tools
from .workspace import Workspace


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "A path relative to the workspace."}


def build_tools(workspace: Workspace, ledger: Ledger, max_read_bytes: int) -> list[Tool]:
    """The five demo tools over one workspace and ledger."""

    async def read_file(args: dict[str, Any], exec: ToolExecution) -> str:
        return await anyio.to_thread.run_sync(workspace.read, args["path"], max_read_bytes)

    async def list_files(args: dict[str, Any], exec: ToolExecution) -> list[str]:
        return await anyio.to_thread.run_sync(workspace.list, args.get("path", "."))

    async def write_file(args: dict[str, Any], exec: ToolExecution) -> dict[str, Any]:
        size = await anyio.to_thread.run_sync(workspace.write, args["path"], args["content"])
        return {"path": args["path"], "bytes": size}

    return [
        Tool(
            name="read_file",
            description=(
                f"Read a UTF-8 text file in the workspace (at most {max_read_bytes} bytes)."
            ),
            parameters=_object({"path": _PATH}, ["path"]),
            execute=read_file,
            is_concurrency_safe=True,
            read_only=True,
        ),
        Tool(
            name="list_files",
            description="List a workspace folder: sorted names, folders end with '/'.",
            parameters=_object({"path": {**_PATH, "default": "."}}, []),
            execute=list_files,
            is_concurrency_safe=True,
            read_only=True,
        ),
        Tool(
            name="write_file",
            description="Create or replace a workspace file atomically with the given text.",
            parameters=_object({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
            execute=write_file,
        ),
        *ledger_tools(ledger),
    ]
