"""An MCP server written with the SDK for the dsh-mcp tests (run as a child process).

    python toy_server.py [--http PORT] [--state DIR] [--exit-on-start] [--hang-on-start]

Tools: `echo`, `meta` (the request's `_meta`), `headers` (over HTTP), `fail` (an `isError`
result), `reject` (an MCP error response), `slow` (sleeps `seconds`), `block` (never returns),
`crash` (the process exits mid-call), `shapes` (a schema outside the subset), `lying` (its
structured result breaks its output schema), `lookup` (annotated read-only).
With `--state DIR` the server appends its pid to `DIR/starts` on every start, refuses to start
while `DIR/refuse` exists, hangs at start while `DIR/hang` exists, writes `DIR/<tool>.started`
when `slow`, `block` or `crash` begins, and `DIR/slow.cancelled` when the client cancels `slow`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field


class Point(BaseModel):
    x: int
    y: int


class Answer(BaseModel):
    value: int


def build(state: Path | None) -> MCPServer:
    server = MCPServer("toy", version="1.2.3")

    async def lie(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Break `lying`'s structured result after the tool ran (the SDK client refuses it)."""
        result = await call_next(ctx)
        if ctx.method == "tools/call" and (ctx.params or {}).get("name") == "lying":
            data = (
                result.model_dump(by_alias=True, mode="json")
                if isinstance(result, BaseModel)
                else dict(result or {})
            )
            data["structuredContent"] = {"value": "not a number"}
            return data
        return result

    server.middleware.append(lie)

    def started(tool: str) -> None:
        if state is not None:
            (state / f"{tool}.started").write_text(str(os.getpid()), encoding="utf-8")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="The request's _meta as the server received it.")
    def meta(ctx: Context) -> dict[str, Any]:
        return dict(ctx.request_context.meta or {})

    @server.tool(description="The HTTP request headers (streamable HTTP only).")
    def headers(ctx: Context) -> dict[str, str]:
        return dict(ctx.headers or {})

    @server.tool(description="Always fails with an isError result.")
    def fail(reason: str = "the toy tool failed") -> str:
        raise ToolError(reason)

    @server.tool(description="Answers with an MCP error response.")
    def reject() -> str:
        raise MCPError(code=-32602, message="the toy server rejects this call")

    @server.tool(description="Sleep, then answer.")
    async def slow(seconds: float) -> str:
        started("slow")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            if state is not None:
                (state / "slow.cancelled").touch()
            raise
        return f"slept {seconds}s"

    @server.tool(description="Never answers.")
    async def block() -> str:
        started("block")
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool(description="The server process exits while running this tool.")
    def crash() -> str:
        started("crash")
        sys.stdout.flush()
        os._exit(3)

    @server.tool(description="A schema with keywords outside the subset.")
    def shapes(
        name: Annotated[str, Field(min_length=2, pattern="^[a-z]+$")],
        points: Annotated[list[Point], Field(min_length=1)],
        mode: Literal["fast", "slow"] = "fast",
        note: str | None = None,
    ) -> str:
        return f"{name}: {len(points)} points, {mode}, {note}"

    @server.tool(description="Its answer breaks its own output schema (see `lie`).")
    def lying() -> Answer:
        started("lying")
        return Answer(value=1)

    @server.tool(
        description="A read-only lookup.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def lookup(key: str) -> dict[str, str]:
        return {"key": key, "value": key.upper()}

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--state", type=Path)
    parser.add_argument("--exit-on-start", action="store_true")
    parser.add_argument("--hang-on-start", action="store_true")
    args = parser.parse_args()
    if args.state is not None:
        with open(args.state / "starts", "a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    if args.exit_on_start or (args.state is not None and (args.state / "refuse").exists()):
        print("toy server: refusing to start", file=sys.stderr)
        sys.exit(5)
    if args.hang_on_start or (args.state is not None and (args.state / "hang").exists()):
        time.sleep(3600)
    server = build(args.state)
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
