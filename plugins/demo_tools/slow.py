"""`sleep_then_write {path, content, seconds}`: a demo tool that takes a while, then writes a
workspace file; it stops at once, writing nothing, when its call is aborted (`exec.signal`).

It makes a crash or a Ctrl-C during a tool body easy to reproduce (see
`config/overlays/slow-tool.yml` and docs/tools-and-cancellation.md).
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from plugins.llm import HarnessError
from plugins.tools import Tool, ToolArgsError, ToolExecution

from .workspace import Workspace

#: The longest sleep a call may ask for.
MAX_SECONDS = 3600


class NotWrittenError(HarnessError):
    """The call was aborted while it slept: the file was not written."""

    def __init__(self, path: str, slept: float, seconds: float) -> None:
        super().__init__(
            f'aborted after {slept:.1f}s of a {seconds:g}s wait: "{path}" was not written',
            "NOT_WRITTEN",
        )


def slow_tool(workspace: Workspace) -> Tool:
    """The `sleep_then_write` tool over `workspace`."""

    async def sleep_then_write(args: dict[str, Any], exec: ToolExecution) -> dict[str, Any]:
        path, seconds = args["path"], args["seconds"]
        if not 0 <= seconds <= MAX_SECONDS:
            raise ToolArgsError([f'"arguments.seconds" must be between 0 and {MAX_SECONDS}'])
        started = anyio.current_time()
        with anyio.move_on_after(seconds):
            await exec.signal.wait()
        if exec.signal.aborted:
            raise NotWrittenError(path, anyio.current_time() - started, seconds)
        size = await anyio.to_thread.run_sync(workspace.write, path, args["content"])
        return {"path": path, "bytes": size}

    return Tool(
        name="sleep_then_write",
        description=(
            "Wait the given number of seconds, then create or replace a workspace file with the "
            "given text (a slow side effect, for trying out crashes and cancellation)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A path relative to the workspace."},
                "content": {"type": "string"},
                "seconds": {"type": "number", "description": f"0 to {MAX_SECONDS}."},
            },
            "required": ["path", "content", "seconds"],
            "additionalProperties": False,
        },
        execute=sleep_then_write,
    )
