"""Per-call overhead of an MCP tool against the same tool registered natively (one run).

    python tests/plugins/mcp/measure_overhead.py [CALLS]

Times `tools.execute` of three pairs, alternating native and MCP calls: `echo` (the toy SDK
server over stdio, and over streamable HTTP) and `get_current_time` (mcp-server-time over stdio
against the same computation in-process). Prints the median and p90 of each and the difference
of the medians, which is what going through MCP costs per call.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from mcp_helpers import http_toy, mounted, toy

from framework import AbortController
from plugins.tools import Tool, ToolExecutionInput


async def echo(args: Any, exec: Any) -> Any:
    return {"content": [{"type": "text", "text": args["text"]}]}


async def current_time(args: Any, exec: Any) -> Any:
    now = datetime.now(ZoneInfo(args["timezone"]))
    return {
        "timezone": args["timezone"],
        "datetime": now.isoformat(timespec="seconds"),
        "day_of_week": now.strftime("%A"),
        "is_dst": bool(now.dst()),
    }


def native(name: str, body: Any, field: str) -> Tool:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return Tool(name=name, description=name, parameters=schema, execute=body)


async def timed(root: Any, name: str, args: dict[str, Any], index: int) -> float:
    call = ToolExecutionInput(f"call-{index}", name, args, AbortController().signal)
    start = time.perf_counter()
    result = await root.tools.execute(call)
    elapsed = time.perf_counter() - start
    assert not result.is_error, result.to_json()
    return elapsed


async def pair(root: Any, native_name: str, mcp_name: str, args: dict[str, Any], n: int) -> None:
    for index in range(10):  # warm up both paths
        await timed(root, native_name, args, index)
        await timed(root, mcp_name, args, index)
    ours: list[float] = []
    theirs: list[float] = []
    for index in range(n):
        ours.append(await timed(root, native_name, args, index))
        theirs.append(await timed(root, mcp_name, args, index))
    rows = []
    for label, samples in ((native_name, ours), (mcp_name, theirs)):
        median = statistics.median(samples) * 1e6
        p90 = statistics.quantiles(samples, n=10)[-1] * 1e6
        rows.append((label, median, p90))
        print(f"  {label:32} median {median:8.1f} µs   p90 {p90:8.1f} µs")
    print(f"  {'overhead (median difference)':32} {rows[1][1] - rows[0][1]:8.1f} µs per call")


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as state, http_toy(Path(state)) as (url, _process):
        servers = {
            "toy": toy(),
            "web": {"url": url},
            "time": {"command": "mcp-server-time", "args": ["--local-timezone", "Etc/UTC"]},
        }
        async with mounted(servers) as m:
            m.root.tools.register(native("echo", echo, "text"))
            m.root.tools.register(native("get_current_time", current_time, "timezone"))
            print(f"{n} calls each, alternating, one process (anyio on asyncio)")
            await pair(m.root, "echo", "mcp__toy__echo", {"text": "hello"}, n)
            await pair(m.root, "echo", "mcp__web__echo", {"text": "hello"}, n)
            timezone = {"timezone": "Asia/Tokyo"}
            await pair(m.root, "get_current_time", "mcp__time__get_current_time", timezone, n)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
