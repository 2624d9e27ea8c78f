"""P9: our SQLite backend's durable checkpoint of one agent step vs LangGraph's `SqliteSaver.put`
of the equivalent conversation state, at 10, 100 and 1000 prior messages (goal: ours ≥ 5× faster
at 1000).

Ours: one ~2 KB step (5 events, two new messages) appended to a live session, then the timed
`await ctx.sessions.flush(session)` — one `BEGIN IMMEDIATE` … `COMMIT` of the new rows only
(`p6_sqlite_growth.Workload`), in two modes: the library default (the three sizes' sessions
share one backend and every commit hops to its I/O thread), and the `dsh` CLI's
`inlineWriteMaxMs: 2` (each size's session alone on its own backend, so the inline gate may run
the commit on the caller's thread as LangGraph does; docs/performance.md).

LangGraph: the timed `SqliteSaver.put` (called directly, no thread hop) of a checkpoint whose
`messages` channel holds the whole conversation, chained to the previous checkpoint as a graph
run does, in two forms: the LangChain message objects a LangGraph chat agent keeps
(`HumanMessage`, `AIMessage` with `tool_calls`, `ToolMessage` — what `MessagesState` holds; the
headline ratio), and the same plain JSON dicts our events carry (the cheapest state it could
serialize; a conservative bound).

Same durability: LangGraph's connection runs `journal_mode=WAL` (set by `SqliteSaver.setup`) and
`PRAGMA synchronous=FULL` (both read back), so each `put` commit fsyncs the WAL like ours. Both
databases live in one temporary folder; the twelve cases run once each per round, in an order
shuffled every round (seeded), so no case always follows another: a checkpoint's `fsync` costs
more right after a large write to the same disk (a LangGraph `put` of 1000 messages) than after
a small one, and in a fixed order that cost fell on the same cases every round
(docs/performance.md, "A growing WAL's `fsync`").

Same WAL state: a WAL grows by each commit's frames until its first checkpoint (at
`wal_autocheckpoint`'s 1000 pages) restarts it, after which commits overwrite its frames in place,
and the `fdatasync` of a commit that grows the file costs more (docs/performance.md, "A growing
WAL's `fsync`"). LangGraph's one database took its 1000-message puts and wrapped within the
warm-up, while each of our inline databases commits a few pages a step and used to grow through
most or all of the timed rounds. So after the warm-up rounds, each database whose WAL has not yet
reached that size gets untimed checkpoints until it has (`past_first_wrap`): every case is timed
with a WAL past its first wrap, the steady state of a long-running process.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from benchmarks.harness import Row, Series, report, row
from benchmarks.p6_sqlite_growth import (
    SIZES,
    WARMUP,
    Growth,
    assistant_message,
    sqlite_stack,
    tool_message,
    user_message,
)

ROUNDS = 150
#: A WAL of `wal_autocheckpoint`'s default 1000 frames of 4096-byte pages (each frame with its
#: 24-byte header, after the file's 32-byte header): once a WAL has reached it, its first
#: checkpoint has run and later commits overwrite its frames in place.
WRAPPED_WAL_BYTES = 32 + 1000 * (4096 + 24)
#: `inlineWriteMaxMs` of the inline stacks (the `dsh` CLI's app sets the same).
INLINE_MAX_MS = 2.0
#: Seed of the per-round shuffle of the cases' order (the same order sequence every run).
ORDER_SEED = 9


def as_langchain(message: dict[str, Any]) -> BaseMessage:
    """The LangChain message a LangGraph chat agent keeps for one of our message dicts."""
    text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
    if message["source"]["kind"] == "tool":
        (block,) = message["content"]
        result = "".join(part["text"] for part in block["content"])
        return ToolMessage(content=result, tool_call_id=block["toolCallId"], id=message["id"])
    if message["role"] == "user":
        return HumanMessage(content=text, id=message["id"])
    calls = [
        {"id": b["id"], "name": b["name"], "args": json.loads(b["arguments"])}
        for b in message["content"]
        if b["type"] == "tool-call"
    ]
    return AIMessage(content=text, id=message["id"], tool_calls=calls)


class LangGraphThread:
    """One LangGraph thread whose state is a message list, checkpointed by `put` per step.

    `langchain=True` keeps LangChain message objects (what `MessagesState` holds); otherwise
    the plain JSON dicts our events carry (the cheapest state LangGraph could serialize).
    """

    def __init__(self, saver: SqliteSaver, size: int, *, langchain: bool) -> None:
        self.saver = saver
        self.size = size
        self.convert: Any = as_langchain if langchain else dict
        kind = "LangChain messages" if langchain else "message dicts"
        self.series = Series(f"langgraph put ({kind}), {size} prior")
        self.threads = 0
        self.messages: list[Any] = []
        self.config: dict[str, Any] = {}
        self.version = 0

    def fresh(self) -> None:
        """A new thread holding `size` prior messages (its first checkpoint untimed)."""
        self.threads += 1
        self.messages = [
            self.convert(user_message(k) if k % 2 == 0 else assistant_message(k))
            for k in range(self.size)
        ]
        thread_id = f"p9-{self.series.name}-{self.threads}"
        self.config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.version = 0
        self.put()

    def put(self) -> None:
        self.version += 1
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": list(self.messages)}
        checkpoint["channel_versions"] = {"messages": self.version}
        metadata: Any = {"source": "loop", "step": self.version}
        self.config = self.saver.put(  # type: ignore[assignment]
            self.config,  # type: ignore[arg-type]
            checkpoint,
            metadata,
            {"messages": self.version},
        )

    def checkpoint(self, *, record: bool = True) -> None:
        if not self.messages or len(self.messages) > self.size * 3 // 2:
            self.fresh()
        k = len(self.messages)
        call_id = f"call-{self.version}"
        new = [assistant_message(k, call_id), tool_message(k + 1, call_id)]
        self.messages += [self.convert(message) for message in new]
        start = time.perf_counter()
        self.put()
        if record:
            self.series.samples.append(time.perf_counter() - start)


def langgraph_saver(path: Path) -> tuple[SqliteSaver, sqlite3.Connection]:
    """A `SqliteSaver` in WAL mode with `synchronous=FULL`, checked by reading both back."""
    connection = sqlite3.connect(path, check_same_thread=False)
    connection.execute("PRAGMA synchronous = FULL")
    saver = SqliteSaver(connection)
    saver.setup()
    modes = (
        connection.execute("PRAGMA journal_mode").fetchone()[0],
        connection.execute("PRAGMA synchronous").fetchone()[0],
    )
    if modes != ("wal", 2):
        raise RuntimeError(f"LangGraph connection is not WAL + synchronous=FULL: {modes}")
    return saver, connection


def wal_size(database: Path) -> int:
    try:
        return os.stat(f"{database}-wal").st_size
    except FileNotFoundError:
        return 0


async def past_first_wrap(database: Path, checkpoint: Callable[[], Awaitable[None]]) -> int:
    """Untimed checkpoints until `database`'s WAL has grown to `WRAPPED_WAL_BYTES`; how many."""
    count = 0
    while wal_size(database) < WRAPPED_WAL_BYTES:
        await checkpoint()
        count += 1
    return count


async def measure(rounds: int = ROUNDS, warmup: int = WARMUP) -> dict[str, list[Series]]:
    with tempfile.TemporaryDirectory(prefix="dsh-p9-") as directory:
        os.chmod(directory, 0o700)
        folder = Path(directory)
        saver, connection = langgraph_saver(folder / "langgraph.sqlite3")
        try:
            async with AsyncExitStack() as stacks:
                shared = await stacks.enter_async_context(sqlite_stack(folder))
                ours = [Growth(shared, size, mode=" (I/O thread)") for size in SIZES]
                inline = []
                for size in SIZES:
                    stack = sqlite_stack(folder, f"inline-{size}", INLINE_MAX_MS)
                    ctx = await stacks.enter_async_context(stack)
                    inline.append(Growth(ctx, size, mode=" (inline gate)"))
                lc = [LangGraphThread(saver, size, langchain=True) for size in SIZES]
                dicts = [LangGraphThread(saver, size, langchain=False) for size in SIZES]
                cases: list[Growth | LangGraphThread] = [*ours, *inline, *lc, *dicts]
                order = random.Random(ORDER_SEED)
                for record, count in ((False, warmup), (True, rounds)):
                    if record:
                        await wrap_all(folder, ours, inline, lc)
                    for _ in range(count):
                        order.shuffle(cases)
                        for case in cases:
                            done = case.checkpoint(record=record)
                            if done is not None:
                                await done
        finally:
            connection.close()
    return {
        "ours": [case.series for case in ours],
        "inline": [case.series for case in inline],
        "langchain": [case.series for case in lc],
        "dicts": [case.series for case in dicts],
    }


async def wrap_all(
    folder: Path, ours: list[Growth], inline: list[Growth], lc: list[LangGraphThread]
) -> None:
    """Every database's WAL past its first wrap (`past_first_wrap`), each through its own
    cases' untimed checkpoints."""

    async def put() -> None:
        lc[-1].checkpoint(record=False)

    await past_first_wrap(folder / "langgraph.sqlite3", put)
    await past_first_wrap(folder / "sessions.sqlite3", partial(ours[0].checkpoint, record=False))
    for size, gated in zip(SIZES, inline, strict=True):
        database = folder / f"inline-{size}.sqlite3"
        await past_first_wrap(database, partial(gated.checkpoint, record=False))


def main(rounds: int = ROUNDS) -> list[Row]:
    found = anyio.run(measure, rounds)
    rows: list[Row] = []
    speedup: dict[str, dict[str, dict[str, float]]] = {
        mode: {"langchain": {}, "dicts": {}} for mode in ("thread", "inline")
    }
    for index, size in enumerate(SIZES):
        mine, gated = found["ours"][index], found["inline"][index]
        rows.append(row(mine, note="baseline: ours, library default"))
        rows.append(row(gated, mine, "ours with the dsh CLI's inline gate"))
        for kind in ("langchain", "dicts"):
            peer = found[kind][index]
            speedup["thread"][kind][str(size)] = peer.median / mine.median
            speedup["inline"][kind][str(size)] = peer.median / gated.median
            rows.append(
                row(
                    peer,
                    mine,
                    f"LangGraph / ours ({kind}); {peer.median / gated.median:.2f}x vs inline",
                )
            )
    report(
        "p9_langgraph",
        "SQLite checkpoint of one step vs LangGraph SqliteSaver.put of the conversation state "
        "(both WAL + synchronous=FULL); goal: ours ≥ 5× faster at 1000 messages",
        rows,
        {
            "sizes": list(SIZES),
            "rounds": rounds,
            "speedup": speedup,
            "inline_write_max_ms": INLINE_MAX_MS,
            "durability": "both: journal_mode=WAL, synchronous=FULL",
        },
    )
    return rows


if __name__ == "__main__":
    main()
