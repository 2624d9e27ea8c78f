"""Helpers for the dsh-mcp tests: mounting the plugin, calling tools, finding server processes."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

import plugins.mcp as mcp_plugin
import plugins.tools as tools_plugin
from framework import AbortController, AbortSignal, Context, Fiber
from plugins.tools import ToolExecutionInput, ToolExecutionResult

TOY = Path(__file__).with_name("toy_server.py")
#: Set in every test server's environment so the tests can find its processes.
MARK = "DSH_MCP_TEST_MARK"


def toy(state: Path | None = None, *flags: str, **fields: Any) -> dict[str, Any]:
    """A `servers:` entry running the toy server over stdio."""
    args = [str(TOY), *flags]
    if state is not None:
        args += ["--state", str(state)]
    return {"command": sys.executable, "args": args, **fields}


def starts(state: Path) -> list[int]:
    """The pids the toy server logged, one per start."""
    path = state / "starts"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries `MARK=mark`."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle in environ.read().split(b"\0") and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def code(result: ToolExecutionResult) -> str | None:
    """The result's `error.info.code` (None for a success or a plain failure)."""
    info = None if result.error is None else result.error.info
    return None if info is None else info["code"]


async def eventually(predicate: Any, timeout: float = 20.0) -> None:
    """Wait until `predicate()` is true (polling), or fail after `timeout` seconds."""
    with anyio.fail_after(timeout):
        for _ in itertools.count():
            if predicate():
                return
            await anyio.sleep(0.02)


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    """Poll `predicate` (a blocking helper for the sync tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@dataclass
class Mounted:
    root: Context
    fiber: Fiber

    async def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str = "call-1",
        signal: AbortSignal | None = None,
        key: str | None = None,
        agent: Any = None,
    ) -> ToolExecutionResult:
        result: ToolExecutionResult = await self.root.tools.execute(
            ToolExecutionInput(
                call_id,
                name,
                {} if arguments is None else arguments,
                AbortController().signal if signal is None else signal,
                agent=agent,
                idempotency_key=key,
            )
        )
        return result


@asynccontextmanager
async def mounted(
    servers: dict[str, Any], *, timeouts: bool = False, **config: Any
) -> AsyncIterator[Mounted]:
    """A root with `dsh-tools` (and the timeout policy if asked) and `dsh-mcp` mounted."""
    async with Context() as root:
        await root.plugin(tools_plugin)
        if timeouts:
            import plugins.tool_timeout_policy as timeout_policy

            await root.plugin(timeout_policy)
        fiber = root.plugin(mcp_plugin, {"servers": servers, **config})
        await fiber
        yield Mounted(root, fiber)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_toy(state: Path, port: int | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The toy server on streamable HTTP at 127.0.0.1 (a child process); yields its MCP url."""
    port = free_port() if port is None else port
    process = subprocess.Popen(
        [sys.executable, str(TOY), "--http", str(port), "--state", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP toy server did not start") from None
                time.sleep(0.05)
        yield url, process
    finally:
        process.kill()
        process.wait()


@asynccontextmanager
async def agent_stack(
    responses: list[Any], servers: dict[str, Any], root: Path | None = None
) -> AsyncIterator[Context]:
    """The agent runtime (replay model, JSONL sessions under `root` if given) with dsh-mcp."""
    import plugins.agent
    import plugins.llm
    import plugins.llm_replay
    import plugins.session
    import plugins.session_persistence_jsonl

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(tools_plugin)
        if root is not None:
            await ctx.plugin(
                plugins.session_persistence_jsonl, {"root": str(root), "compression": "none"}
            )
        await ctx.plugin(plugins.llm_replay, {"responses": responses})
        await ctx.plugin(mcp_plugin, {"servers": servers})
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay"})
        yield ctx


def call(call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    """A scripted tool call."""
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments}
