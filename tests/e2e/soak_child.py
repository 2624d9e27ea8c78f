"""Child process of the randomized crash soak (R2, docs/quality.md): one session until SIGKILLed.

    python soak_child.py ROOT ACKS RUN SEED BACKEND

It mounts sessions, llm, replay, tools, agents, JSONL raw with a 5 ms write-behind window (so
background writes and the checkpoint policy's barriers interleave) and the policy. It resumes the
soak session (creating it on the first run), writes `ready` into ACKS, then sends prompts forever:
each turn replays reasoning plus two parallel calls of a concurrency-safe tool and one exclusive
call, then a text answer; some turns answer with text only.

Acknowledgement: every `ctx.sessions.flush` (the policy's checkpoints, the runtime's own) that
returns normally makes durable every event appended before it was called, so the child then
appends `ack <count>` to ACKS (write + flush: the page cache survives SIGKILL); a tool body
appends `body <callId>` when it starts (the policy promises its `tool/call` is durable by then).
BACKEND is the child's event loop (`asyncio` or `trio`); SEED drives its small random choices.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO, Any

import anyio

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl
import plugins.tools
from framework import Context
from plugins.session.store import SessionStore
from plugins.tools import Tool

SESSION_ID = "crash-soak"
WINDOW_MS = 5
TURNS = 400


def script(run: int, rng: random.Random) -> list[dict[str, Any]]:
    """Replay responses for up to TURNS prompts, with call ids unique across runs."""
    responses: list[dict[str, Any]] = []
    for turn in range(TURNS):
        if rng.random() < 0.25:
            responses.append({"text": f"run {run} turn {turn}: a short answer without tools."})
            continue
        prefix = f"r{run}-t{turn}"
        responses.append(
            {
                "reasoning": "Two lookups can run together; the write must run alone.",
                "tool_calls": [
                    {"id": f"{prefix}-a", "name": "lookup", "arguments": {"key": "a"}},
                    {"id": f"{prefix}-b", "name": "lookup", "arguments": {"key": "b"}},
                    {"id": f"{prefix}-c", "name": "record", "arguments": {"note": prefix}},
                ],
            }
        )
        responses.append({"text": f"run {run} turn {turn}: both lookups and the record are done."})
    return responses


def tools(rng: random.Random, acks: IO[str]) -> list[Tool]:
    """A concurrency-safe and an exclusive tool; each body first logs `body <callId>`."""

    def started(exec: Any) -> None:
        acks.write(f"body {exec.call_id}\n")
        acks.flush()

    async def lookup(args: Any, exec: Any) -> Any:
        started(exec)
        await anyio.sleep(rng.uniform(0.001, 0.004))
        return {"key": args["key"], "value": 42}

    async def record(args: Any, exec: Any) -> Any:
        started(exec)
        await anyio.sleep(rng.uniform(0.001, 0.004))
        return {"recorded": args["note"]}

    return [
        Tool(
            name="lookup",
            description="look a key up (read-only)",
            parameters={"type": "object"},
            execute=lookup,
            is_concurrency_safe=True,
        ),
        Tool(
            name="record",
            description="record a note (exclusive)",
            parameters={"type": "object"},
            execute=record,
        ),
    ]


def acknowledge_flushes(acks: IO[str]) -> None:
    """Append `ack <n>` to ACKS whenever a flush of the soak session returns normally."""
    real: Callable[[SessionStore, Any], Awaitable[bool]] = SessionStore.flush

    async def flush(self: SessionStore, session: Any) -> bool:
        live = self.get(session) if isinstance(session, str) else session
        events = live.events if live is not None and live.id == SESSION_ID else None
        count = events[-1]["seq"] + 1 if events else 0
        result = await real(self, session)
        if count:
            acks.write(f"ack {count}\n")
            acks.flush()
        return result

    SessionStore.flush = flush  # type: ignore[method-assign]


async def main(root: str, acks_path: str, run: int, seed: int) -> None:
    rng = random.Random(seed)
    with Path(acks_path).open("a", encoding="utf-8") as acks:
        acknowledge_flushes(acks)
        async with Context() as ctx:
            await ctx.plugin(plugins.session)
            await ctx.plugin(plugins.llm)
            await ctx.plugin(plugins.tools)
            await ctx.plugin(
                plugins.session_persistence_jsonl,
                {"root": root, "compression": "none", "write_batch_max_delay_ms": WINDOW_MS},
            )
            await ctx.plugin(
                plugins.llm_replay,
                {"responses": script(run, rng), "chunk_size": 6, "delay_ms": 0.5},
            )
            await ctx.plugin(plugins.session_checkpoint_policy)
            await ctx.plugin(
                plugins.agent,
                {"provider": "replay", "model": "replay", "max_parallel_tool_calls": 4},
            )
            for tool in tools(rng, acks):
                ctx.tools.register(tool)
            stored = {header["id"] for header in await ctx.sessionPersistence.list()}
            if SESSION_ID in stored:
                handle = await ctx.agents.resume(SESSION_ID)
            else:
                handle = await ctx.agents.create(SESSION_ID, meta={"cwd": root})
            acks.write("ready\n")
            acks.flush()
            for turn in range(TURNS):
                handle.agent.followup(f"run {run} prompt {turn}: look a and b up, then record.")
                await handle.agent.when_idle()
            acks.write("script-exhausted\n")
            acks.flush()
            await anyio.sleep_forever()


if __name__ == "__main__":
    root_arg, acks_arg, run_arg, seed_arg, backend_arg = sys.argv[1:6]
    anyio.run(main, root_arg, acks_arg, int(run_arg), int(seed_arg), backend=backend_arg)
