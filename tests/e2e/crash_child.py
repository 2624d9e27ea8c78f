"""Child process for the hard-crash tests: drives one agent until a failpoint, then hangs there.

    python crash_child.py ROOT MARKER MODE [--no-policy] [--backend NAME --backend-config JSON]

It mounts sessions, llm, tools, agents, one persistence backend (JSONL raw by default, with a
60 s write-behind window so only checkpoint barriers persist) and the checkpoint policy. When the
failpoint of MODE is reached it writes MODE's marker into MARKER and waits to be SIGKILLed.

Modes: `request` (the adapter received the request), `midstream` (three text deltas streamed),
`tool` (the tool body started), `parallel` (the first of two parallel calls finished, the second
is running), `write` (half of the batch holding the `tool/call` reached the file), `queued` (a
second prompt was queued while the first turn waits for the model, and flushed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

import plugins.agent
import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy
import plugins.tools
from framework import Context
from plugins.llm import chunks
from plugins.tools import Tool

SESSION_ID = "semantic-checkpoint-crash"
MARKERS = {
    "request": "request-dispatched",
    "midstream": "stream-started",
    "tool": "tool-side-effect",
    "parallel": "second-tool-running",
    "write": "persistence-write-torn",
    "queued": "prompt-queued",
}


def reach(marker: Path, mode: str) -> None:
    marker.write_text(MARKERS[mode])


class CrashAdapter:
    """Provider `crash`: answers according to the failpoint under test."""

    def __init__(self, mode: str, marker: Path) -> None:
        self.mode = mode
        self.marker = marker
        self.asked = anyio.Event()

    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        if self.mode == "queued":
            self.asked.set()
            await anyio.sleep_forever()
        if self.mode == "request":
            reach(self.marker, "request")
            await anyio.sleep_forever()
        if self.mode == "midstream":
            yield chunks.block_start(0, "text")
            for piece in ("partial ", "response ", "text"):
                yield chunks.text_delta(0, piece)
            reach(self.marker, "midstream")
            await anyio.sleep_forever()
        calls = [("crash-call", "crash_tool")]
        if self.mode == "parallel":
            calls = [("fast-call", "fast_tool"), ("slow-call", "slow_tool")]
        for index, (call_id, name) in enumerate(calls):
            yield chunks.block_start(index, "tool-call")
            yield chunks.block_end(index, chunks.tool_call_block(call_id, name, "{}"))
        yield chunks.finish(chunks.stop_reason("tool-calls"))


def tools(mode: str, marker: Path) -> list[Tool]:
    async def crash_tool(args: Any, exec: Any) -> None:
        reach(marker, "tool")
        await anyio.sleep_forever()

    async def fast_tool(args: Any, exec: Any) -> None:
        return None

    async def slow_tool(args: Any, exec: Any) -> None:
        await anyio.sleep(0.05)  # let the fast call finish and commit its result first
        reach(marker, "parallel")
        await anyio.sleep_forever()

    def make(name: str, body: Any, parallel: bool = False) -> Tool:
        return Tool(
            name=name,
            description=f"{name} for the crash tests",
            parameters={},
            output_schema={"type": "null"},
            execute=body,
            is_concurrency_safe=parallel,
        )

    if mode == "parallel":
        return [make("fast_tool", fast_tool, True), make("slow_tool", slow_tool, True)]
    return [make("crash_tool", crash_tool)]


def tear_the_tool_call_write(marker: Path) -> None:
    """Make the JSONL write of the batch holding `tool/call` stop halfway, then hang."""
    from plugins.session_persistence_jsonl.fileops import FileOps

    real_write = FileOps.write

    def write(self: FileOps, fd: int, data: memoryview) -> int:
        if b'"tool/call"' in bytes(data):
            half = bytes(data)[: len(data) // 2]
            os.write(fd, half)
            reach(marker, "write")
            while True:  # a worker thread: block here until the kill
                time.sleep(1)
        return real_write(self, fd, data)

    FileOps.write = write  # type: ignore[method-assign]


def backend_plugin(name: str) -> Any:
    if name == "jsonl":
        import plugins.session_persistence_jsonl as module
    elif name == "sqlite":
        import plugins.session_persistence_sqlite as module  # type: ignore[no-redef]
    else:
        import plugins.session_persistence_postgres as module  # type: ignore[no-redef]
    return module


async def main(args: argparse.Namespace) -> None:
    marker = Path(args.marker)
    if args.mode == "write":
        tear_the_tool_call_write(marker)
    config = json.loads(args.backend_config) if args.backend_config else {}
    if args.backend == "jsonl":
        config = {"root": args.root, "compression": "none", **config}
    config.setdefault("write_batch_max_delay_ms", 60_000)
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(backend_plugin(args.backend), config)
        if not args.no_policy:
            await ctx.plugin(plugins.session_checkpoint_policy)
        await ctx.plugin(plugins.agent, {"provider": "crash", "model": "crash"})
        adapter = CrashAdapter(args.mode, marker)
        ctx.llm.register_adapter("crash", adapter)
        for tool in tools(args.mode, marker):
            ctx.tools.register(tool)
        handle = await ctx.agents.create(SESSION_ID, meta={"cwd": args.root})
        handle.agent.followup("exercise the crash boundary")
        if args.mode == "queued":
            await adapter.asked.wait()
            handle.agent.followup("queued before the crash")
            await ctx.sessions.flush(handle.agent.session)
            reach(marker, "queued")
            await anyio.sleep_forever()
        await handle.agent.when_idle()
        await anyio.Path(marker).write_text("finished-without-reaching-the-failpoint")
        await anyio.sleep_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("marker")
    parser.add_argument("mode", choices=sorted(MARKERS))
    parser.add_argument("--no-policy", action="store_true")
    parser.add_argument("--backend", default="jsonl", choices=["jsonl", "sqlite", "postgres"])
    parser.add_argument("--backend-config", default="")
    parsed = parser.parse_args()
    anyio.run(main, parsed)
    sys.exit(0)
