"""Helpers for the dsh-mcp tests: mounting the plugin, calling tools, finding server processes."""

from __future__ import annotations

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
def http_toy(state: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The toy server on streamable HTTP at 127.0.0.1 (a child process); yields its MCP url."""
    port = free_port()
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
