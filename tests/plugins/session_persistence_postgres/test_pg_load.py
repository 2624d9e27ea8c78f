"""Load (R7 over PostgreSQL): 16 replayed agents with parallel tools in this process plus 4 child
processes with concurrent live sessions, all writing to one database at once. Every log must
end up contiguous from seq 0, with no duplicate or missing seq, equal to what was appended."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from pg_helpers import backend, execute
from postgres_support import PostgresTarget

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_persistence_postgres as pg
import plugins.tools
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session.repair import interrupted_turn_closers
from plugins.tools import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

CHILD = Path(__file__).with_name("pg_child.py")
ROOT = Path(__file__).resolve().parents[3]
AGENTS = 16
TURNS = 3
PARALLEL = 4
CHILDREN = 4


def script() -> list[dict[str, Any]]:
    """One response with PARALLEL tool calls, then a text answer, per agent turn (globally
    consumed in arrival order, so every call id is unique)."""
    responses: list[dict[str, Any]] = []
    for i in range(AGENTS * TURNS):
        calls = [
            {"id": f"r{i}c{k}", "name": "checkpoint", "arguments": {"k": k}}
            for k in range(PARALLEL)
        ]
        responses.append({"text": f"calling {i}", "tool_calls": calls})
        responses.append({"text": f"done {i}"})
    return responses


async def checkpoint(args: Any, exec: Any) -> Any:
    """A parallel tool whose body makes the session durable (concurrent flushes)."""
    await exec.agent.ctx.sessions.flush(exec.agent.session)
    await anyio.sleep(0.001)
    return f"ok {args['k']}"


async def run_agents(target: PostgresTarget) -> dict[str, list[str]]:
    """Drive AGENTS agents through TURNS turns each; their live events as JSON texts."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(pg, target.config(writeBatchMaxDelayMs=5))
        await ctx.plugin(plugins.llm_replay, {"responses": script()})
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay-1"})
        ctx.tools.register(
            Tool(
                name="checkpoint",
                description="flush the session",
                parameters={"type": "object"},
                execute=checkpoint,
                is_concurrency_safe=True,
            )
        )
        handles = [await ctx.agents.create(f"agent-{n}", meta={"cwd": "/w"}) for n in range(AGENTS)]

        async def converse(handle: Any) -> None:
            for turn in range(TURNS):
                handle.agent.followup(f"turn {turn}")
                await handle.agent.when_idle()

        async with anyio.create_task_group() as group:
            for handle in handles:
                group.start_soon(converse, handle)
        live = {h.agent.session.id: [dumps(e) for e in h.agent.session.events] for h in handles}
        for handle in handles:
            await handle.dispose()
    return live


async def run_child(target: PostgresTarget, prefix: str, out: dict[str, int]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = await anyio.run_process(
        [sys.executable, str(CHILD), "load", target.dsn, target.schema, prefix],
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    out.update(json.loads(result.stdout.decode().strip().splitlines()[-1]))


async def test_many_sessions_and_processes_keep_every_seq_once(postgres: PostgresTarget) -> None:
    await (setup := backend(postgres)).open()  # create the schema before the children race
    await setup.aclose()
    counts: dict[str, int] = {}
    live: dict[str, list[str]] = {}

    async def agents() -> None:
        live.update(await run_agents(postgres))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for n in range(CHILDREN):
                group.start_soon(run_child, postgres, f"child{n}", counts)
            group.start_soon(agents)
    assert len(live) == AGENTS
    assert len(counts) == CHILDREN * 4
    rows = execute(
        postgres,
        "SELECT s.id, s.next_seq, count(e.seq), count(DISTINCT e.seq), min(e.seq), max(e.seq) "
        "FROM dsh_sessions s JOIN dsh_events e ON e.session_id = s.id GROUP BY s.id, s.next_seq",
    )
    assert len(rows) == AGENTS + CHILDREN * 4
    expected = {**{sid: len(events) for sid, events in live.items()}, **counts}
    for session_id, next_seq, count, distinct, low, high in rows:
        n = expected[session_id]
        assert (next_seq, count, distinct, low, high) == (n, n, n, 0, n - 1), session_id
    reader = backend(postgres)
    calls = 0
    for session_id, events in live.items():
        stored = await reader.load_stored(session_id)
        assert stored is not None
        assert [dumps(e) for e in stored.events] == events
        assert interrupted_turn_closers(stored.events) == []
        calls += sum(e["type"] == "tool/call" for e in stored.events)
    assert calls >= PARALLEL
    assert calls % PARALLEL == 0
    await reader.aclose()
