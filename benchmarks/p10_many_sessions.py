"""P10: many sessions at once. 100 and 1000 concurrent agent sessions in one process (replay
model without delay, one tool call per turn, the checkpoint policy on), on JSONL, SQLite and
PostgreSQL, against LangGraph's async SQLite and Postgres savers under the same concurrency.

Ours: every session runs `TURNS` turn(s) of two steps each (a tool call, then a text answer), all
sessions concurrently on one event loop. Measured: durable steps per second (wall time of the
whole run), the latency of each checkpoint (from the policy's `checkpoint/flushed` events),
and commits per checkpoint (SQLite: the COMMITs its connection runs, one per group of sessions'
appends; PostgreSQL: the transactions that stored event rows, read back from the server as the
distinct `xmin` of the run's `dsh_events` rows (a group of sessions' appends is one); JSONL:
`append_batch` calls, each one fsync of one log; divided by checkpoints).

LangGraph: the same agent as a LangGraph graph (`MessagesState`, a scripted model node that
answers like the replay script, `ToolNode` running the same `lookup`), the same number of
threads each running `TURNS` turns, all concurrently, checkpointed by `AsyncSqliteSaver` (WAL,
`synchronous=FULL`, read back) or `AsyncPostgresSaver` (a pool of `POOL` connections,
`synchronous_commit=on`). A step is one model call (two per turn, as ours); checkpoint latency is
each `aput`; commits are `aput` plus `aput_writes` calls (each autocommits).

Rounds: LangGraph's throughput moved by a third between two runs minutes apart on the shared VM,
so a single run's ratio says little. Each concurrency level runs `ROUNDS` rounds, each on fresh
storage; a round runs every engine once, ours and LangGraph's side by side (ours first in odd
rounds, LangGraph first in even ones). A row of the result is the median of its engine's rounds,
and a ratio is the median of the rounds' ratios, each taken within one round.

PostgreSQL: `$DSH_POSTGRES_DSN`, else `$DSH_TEST_POSTGRES_DSN`, else the local test server; the
PostgreSQL rows are skipped when no server answers. Both peers need the `bench` extra.
"""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psycopg
from psycopg import sql

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl
import plugins.session_persistence_postgres
import plugins.session_persistence_sqlite
import plugins.tools
from benchmarks.harness import RESULTS, machine
from framework import Context
from plugins.tools import Tool

CONCURRENCY = (100, 1000)
#: Turns per session in one round (each round's sessions are new; see the module docstring).
TURNS = 1
#: Rounds per concurrency level; rows and ratios are medians over them.
ROUNDS = 3
POOL = 10
DSN = (
    os.environ.get("DSH_POSTGRES_DSN")
    or os.environ.get("DSH_TEST_POSTGRES_DSN")
    or "postgresql://postgres@127.0.0.1:5432/test"
)


def script() -> list[dict[str, Any]]:
    """Per session: a tool call, then a text answer, `TURNS` times (call ids unique per turn)."""
    responses: list[dict[str, Any]] = []
    for turn in range(1, TURNS + 1):
        call = {"id": f"lookup-{turn}", "name": "lookup", "arguments": {"key": f"k{turn}"}}
        responses += [{"tool_calls": [call]}, {"text": f"The value of k{turn} is 42."}]
    return responses


async def lookup(args: Any, exec: Any) -> Any:
    return {"key": args["key"], "value": 42}


@dataclass
class Outcome:
    """One measured run: which engine, how many sessions, and what it did."""

    engine: str
    sessions: int
    seconds: float
    steps: int
    checkpoints: int
    commits: int
    latencies_ms: list[float] = field(default_factory=list)
    #: Which round of its concurrency level (`measure`).
    round: int = 0

    def to_json(self) -> dict[str, object]:
        ordered = sorted(self.latencies_ms) or [0.0]
        return {
            "engine": self.engine,
            "sessions": self.sessions,
            "seconds": round(self.seconds, 3),
            "steps": self.steps,
            "durable_steps_per_s": round(self.steps / self.seconds, 1),
            "checkpoints": self.checkpoints,
            "commits": self.commits,
            "commits_per_checkpoint": round(self.commits / max(self.checkpoints, 1), 3),
            "checkpoint_p50_ms": round(statistics.median(ordered), 3),
            "checkpoint_p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        }


@asynccontextmanager
async def stack(backend: Any, config: dict[str, Any]) -> AsyncIterator[Context]:
    """Sessions, llm + replay, tools (`lookup`), the policy, agents and one backend."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(backend, config)
        await ctx.plugin(plugins.llm_replay, {"responses": script()})
        await ctx.plugin(plugins.session_checkpoint_policy)
        await ctx.plugin(plugins.agent, {"provider": "replay", "model": "replay"})
        ctx.tools.register(
            Tool(
                name="lookup",
                description="look a key up",
                parameters={"type": "object"},
                execute=lookup,
                read_only=True,
            )
        )
        yield ctx


async def run_ours(engine: str, ctx: Context, sessions: int, cwd: str) -> Outcome:
    """`sessions` agents, each running `TURNS` turns, all at once."""
    latencies: list[float] = []
    checkpoints = 0

    def flushed(event: Any) -> None:
        nonlocal checkpoints
        if event.ok:
            checkpoints += 1
            latencies.append(event.duration_ms)

    backend = ctx.sessionPersistence.backend
    real_append = backend.append_batch
    commits = 0
    # SQLite groups the appends of many sessions into one transaction: count its COMMITs (all
    # of them, lock rows' included) on every connection it opens. PostgreSQL groups them too:
    # the server tells, after the run, how many transactions wrote the rows. A JSONL append is
    # one fsync of one log.
    sqlite = engine == "sqlite"
    real_connect = getattr(backend, "_connect", None)

    def commit_seen(statement: str) -> None:
        nonlocal commits
        if statement == "COMMIT":
            commits += 1

    def traced_connect(read: bool) -> Any:
        assert real_connect is not None
        connection = real_connect(read)
        if connection is not None:
            connection.set_trace_callback(commit_seen)
        return connection

    async def counting_append(*args: Any, **kwargs: Any) -> Any:
        nonlocal commits
        if engine == "jsonl":
            commits += 1
        return await real_append(*args, **kwargs)

    if sqlite:
        backend._connect = traced_connect
    backend.append_batch = counting_append
    dispose = ctx.on("checkpoint/flushed", flushed)
    handles = [
        await ctx.agents.create(f"p10-{engine}-{sessions}-{n}", meta={"cwd": cwd})
        for n in range(sessions)
    ]

    async def drive(handle: Any) -> None:
        for turn in range(1, TURNS + 1):
            handle.agent.followup(f"What is k{turn}?")
            await handle.agent.when_idle()

    start = time.perf_counter()
    try:
        async with anyio.create_task_group() as tg:
            for handle in handles:
                tg.start_soon(drive, handle)
        seconds = time.perf_counter() - start
        if engine == "postgres":
            commits = event_transactions(backend.schema)
    finally:
        dispose()
        backend.append_batch = real_append
        if sqlite:
            del backend._connect
        for handle in handles:
            await handle.dispose()
    return Outcome(engine, sessions, seconds, sessions * TURNS * 2, checkpoints, commits, latencies)


def event_transactions(schema: str) -> int:
    """How many transactions wrote the event rows of PostgreSQL schema `schema`: rows inserted
    by one transaction share its id (`xmin`)."""
    with psycopg.connect(DSN) as conn:
        cursor = conn.execute(
            sql.SQL("SELECT count(DISTINCT xmin::text) FROM {}.dsh_events").format(
                sql.Identifier(schema)
            )
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def lookup_graph(saver: Any) -> Any:
    """The same agent as ours, as a LangGraph graph: a scripted model node and a tool node.

    The model node answers like the replay script (a tool call, then a text answer); the tool
    node is LangGraph's `ToolNode` running `lookup`; every super-step is checkpointed by `saver`.
    """
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @lc_tool
    async def lookup(key: str) -> dict[str, Any]:
        """look a key up"""
        return {"key": key, "value": 42}

    async def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        turn = sum(1 for m in state["messages"] if m.type == "human")
        if last.type == "human":
            call = {"id": f"lookup-{turn}", "name": "lookup", "args": {"key": f"k{turn}"}}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=f"The value of k{turn} is 42.")]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    graph.add_edge("model", END)
    return graph.compile(checkpointer=saver)


class CountingSaver:
    """Wraps a LangGraph async saver: counts and times its `aput` / `aput_writes` commits."""

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self.latencies_ms: list[float] = []
        self.commits = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._saver, name)

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return await self._saver.aput(*args, **kwargs)
        finally:
            self.commits += 1
            self.latencies_ms.append((time.perf_counter() - began) * 1000.0)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        self.commits += 1
        return await self._saver.aput_writes(*args, **kwargs)


async def run_langgraph(engine: str, saver: Any, sessions: int) -> Outcome:
    """`sessions` threads of the same agent graph, each running `TURNS` turns, all at once."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.base import BaseCheckpointSaver

    counting = CountingSaver(saver)
    # The graph checks its checkpointer's type; the wrapper borrows the saver's class.
    counting.__class__ = type("Counting", (CountingSaver, type(saver)), {})
    assert isinstance(counting, BaseCheckpointSaver)
    graph = lookup_graph(counting)

    async def thread(n: int) -> None:
        config: Any = {"configurable": {"thread_id": f"p10-{n}"}}
        for turn in range(1, TURNS + 1):
            await graph.ainvoke({"messages": [HumanMessage(content=f"What is k{turn}?")]}, config)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for n in range(sessions):
            tg.start_soon(thread, n)
    seconds = time.perf_counter() - start
    steps = sessions * TURNS * 2
    checkpoints = len(counting.latencies_ms)
    return Outcome(
        engine, sessions, seconds, steps, checkpoints, counting.commits, counting.latencies_ms
    )


def postgres_error() -> str | None:
    try:
        with psycopg.connect(DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return str(error).splitlines()[0]
    return None


@asynccontextmanager
async def private_schema() -> AsyncIterator[str]:
    schema = f"dsh_bench_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        yield schema
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def measure(
    concurrency: tuple[int, ...] = CONCURRENCY, *, peers: bool = True, rounds: int = ROUNDS
) -> list[Outcome]:
    """Every engine at every concurrency, `rounds` times (see the module docstring);
    `peers=False` measures ours only (no `bench` extra)."""
    outcomes: list[Outcome] = []
    postgres = postgres_error() is None
    for sessions in concurrency:
        for index in range(rounds):
            peer_first = index % 2 == 1
            found = await one_round(sessions, peers=peers, postgres=postgres, peer_first=peer_first)
            for outcome in found:
                outcome.round = index
            outcomes += found
    return outcomes


async def one_round(
    sessions: int, *, peers: bool, postgres: bool, peer_first: bool
) -> list[Outcome]:
    """Every engine once at `sessions`, on fresh storage; each of ours beside its peer, in the
    order `peer_first` says."""
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="dsh-p10-") as directory:
        os.chmod(directory, 0o700)
        root = Path(directory)
        jsonl = {"root": str(root / "jsonl"), "compression": "none"}
        async with stack(plugins.session_persistence_jsonl, jsonl) as ctx:
            outcomes.append(await run_ours("jsonl", ctx, sessions, directory))

        async def ours_sqlite() -> Outcome:
            sqlite_config = {"path": str(root / "sessions.sqlite3")}
            async with stack(plugins.session_persistence_sqlite, sqlite_config) as ctx:
                return await run_ours("sqlite", ctx, sessions, directory)

        async def peer_sqlite() -> Outcome:
            return await langgraph_sqlite(root / "langgraph.sqlite3", sessions)

        outcomes += await side_by_side(ours_sqlite, peer_sqlite if peers else None, peer_first)
    if not postgres:
        return outcomes

    async def ours_postgres() -> Outcome:
        async with private_schema() as schema:
            config = {"dsn": DSN, "schema": schema}
            async with stack(plugins.session_persistence_postgres, config) as ctx:
                return await run_ours("postgres", ctx, sessions, "/p10")

    async def peer_postgres() -> Outcome:
        async with private_schema() as schema:
            return await langgraph_postgres(schema, sessions)

    outcomes += await side_by_side(ours_postgres, peer_postgres if peers else None, peer_first)
    return outcomes


async def side_by_side(
    ours: Callable[[], Awaitable[Outcome]],
    peer: Callable[[], Awaitable[Outcome]] | None,
    peer_first: bool,
) -> list[Outcome]:
    """Ours and its peer (when measured) one after the other, ours first unless `peer_first`."""
    if peer is None:
        return [await ours()]
    if peer_first:
        first = await peer()
        return [await ours(), first]
    return [await ours(), await peer()]


def summarize(
    outcomes: list[Outcome],
) -> tuple[list[dict[str, object]], dict[str, float], dict[str, list[float]]]:
    """One row per engine and concurrency, each figure the median of its rounds (the rounds'
    steps/s beside it); the ratios ours / LangGraph, each the median of the ratios taken within
    one round; and those per-round ratios."""
    rows: dict[tuple[str, int], list[dict[str, object]]] = {}
    speed: dict[tuple[str, int, int], float] = {}
    for outcome in outcomes:
        rows.setdefault((outcome.engine, outcome.sessions), []).append(outcome.to_json())
        speed[outcome.engine, outcome.sessions, outcome.round] = outcome.steps / outcome.seconds
    ratios: dict[str, float] = {}
    per_round: dict[str, list[float]] = {}
    for ours, peer in (("sqlite", "langgraph-sqlite"), ("postgres", "langgraph-postgres")):
        for sessions in sorted({o.sessions for o in outcomes}):
            paired = [
                round(speed[ours, sessions, r] / speed[peer, sessions, r], 2)
                for r in sorted({o.round for o in outcomes})
                if (ours, sessions, r) in speed and (peer, sessions, r) in speed
            ]
            if paired:
                key = f"{ours}/{peer}@{sessions}"
                ratios[key] = statistics.median(paired)
                per_round[key] = paired
    return [median_row(found) for found in rows.values()], ratios, per_round


def median_row(rounds: list[dict[str, object]]) -> dict[str, object]:
    """The rounds of one engine at one concurrency as one row: every figure their median."""
    row = dict(rounds[0])
    for key in (
        "seconds",
        "durable_steps_per_s",
        "commits",
        "commits_per_checkpoint",
        "checkpoint_p50_ms",
        "checkpoint_p99_ms",
    ):
        row[key] = round(statistics.median(float(str(r[key])) for r in rounds), 3)
    row["rounds"] = len(rounds)
    row["round_steps_per_s"] = [r["durable_steps_per_s"] for r in rounds]
    return row


async def langgraph_sqlite(path: Path, sessions: int) -> Outcome:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with aiosqlite.connect(path) as conn:
        await conn.execute("PRAGMA synchronous = FULL")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        async with conn.execute("PRAGMA journal_mode") as cursor:
            mode = (await cursor.fetchone() or [""])[0]
        if mode != "wal":
            raise RuntimeError(f"LangGraph SQLite is not in WAL mode: {mode}")
        return await run_langgraph("langgraph-sqlite", saver, sessions)


async def langgraph_postgres(schema: str, sessions: int) -> Outcome:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "options": f"-c search_path={schema} -c synchronous_commit=on",
    }
    async with AsyncConnectionPool(
        DSN, min_size=POOL, max_size=POOL, kwargs=kwargs, open=False
    ) as pool:
        saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        return await run_langgraph("langgraph-postgres", saver, sessions)


def main() -> list[dict[str, object]]:
    started = time.perf_counter()
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        peers = False
        print("p10: LangGraph is not installed (the `bench` extra): measuring ours only")
    else:
        peers = True
    found = anyio.run(lambda: measure(CONCURRENCY, peers=peers), backend="asyncio")
    outcomes, ratios, per_round = summarize(found)
    print(
        "\np10_many_sessions: concurrent sessions, policy on (replay model, one tool per turn);"
        f" medians of {ROUNDS} rounds"
    )
    header = f"{'engine':<20} {'sessions':>8} {'steps/s':>10} {'p50 ms':>9} {'p99 ms':>9}"
    print(f"{header} {'commits/ckpt':>13}  rounds' steps/s")
    for o in outcomes:
        print(
            f"{o['engine']!s:<20} {o['sessions']!s:>8} {o['durable_steps_per_s']!s:>10} "
            f"{o['checkpoint_p50_ms']!s:>9} {o['checkpoint_p99_ms']!s:>9} "
            f"{o['commits_per_checkpoint']!s:>13}  {o['round_steps_per_s']}"
        )
    print("throughput ratios (ours / LangGraph, medians of the rounds):", ratios)
    print("  each round's:", per_round)
    import json

    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": "p10_many_sessions",
        "title": "concurrent sessions: durable steps/s, checkpoint latency, commits per checkpoint",
        "machine": machine(),
        "turns_per_session": TURNS,
        "rounds": ROUNDS,
        "outcomes": outcomes,
        "throughput_ratios": ratios,
        "throughput_ratio_rounds": per_round,
    }
    (RESULTS / "p10_many_sessions.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(f"(p10 took {time.perf_counter() - started:.1f} s)")
    return outcomes


if __name__ == "__main__":
    main()
