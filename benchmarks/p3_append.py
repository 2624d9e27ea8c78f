"""P3: cost of one `session.append` with a persistence backend attached.

A live session receives streaming-delta events (`assistant/chunk` text deltas, the most frequent
event of a real log) through `Session.append`, in timed batches of 100. The synchronous append
(lossless snapshot, validation, publication to the `session/event` listeners, which only buffer
in the write controller) is compared with the same append on a store without persistence; the
durable side is reported separately as the `sessions.flush` of each batch, divided per event
(one group-committed write and fsync per batch), for JSONL raw and zstd.
"""

from __future__ import annotations

import tempfile
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio

import plugins.session as session_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
from benchmarks.harness import Row, Series, report, row
from framework import Context
from plugins.session import Session

BATCH = 100
ROUNDS = 200
WARMUP = 20
MODES = {"raw": "none", "zstd": "zstd"}


def _chunk(index: int) -> dict[str, Any]:
    return {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f" w{index}"}}


async def _live_session(stack: AsyncExitStack, config: dict[str, Any]) -> tuple[Context, Session]:
    """A root context with the session store and a JSONL backend, and one live session."""
    root = await stack.enter_async_context(Context())
    await root.plugin(session_plugin)
    await root.plugin(jsonl_plugin, config)
    session: Session = root.sessions.create(meta={"cwd": "/bench"})
    return root, session


def _open_step(session: Session) -> Session:
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    return session


def _append_batch(session: Session) -> float:
    start = time.perf_counter()
    for i in range(BATCH):
        session.append("assistant/chunk", _chunk(i))
    return (time.perf_counter() - start) / BATCH


async def _run() -> list[Row]:
    """Interleave the three cases round by round, so machine drift hits them equally."""
    bare = Series("append · no persistence (unpublished session)")
    appends = {mode: Series(f"append · jsonl {mode}") for mode in MODES}
    flushes = {mode: Series(f"flush per event · jsonl {mode}") for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="dsh-p3-") as tmp:
        async with AsyncExitStack() as stack:
            live = {
                mode: await _live_session(
                    stack, {"root": f"{tmp}/{mode}", "compression": compression}
                )
                for mode, compression in MODES.items()
            }
            standalone = _open_step(Session({"version": 0, "id": "bare", "createdAt": 0}))
            for _, session in live.values():
                _open_step(session)
            for round_index in range(WARMUP + ROUNDS):
                keep = round_index >= WARMUP
                sample = _append_batch(standalone)
                if keep:
                    bare.samples.append(sample)
                for mode, (root, session) in live.items():
                    sample = _append_batch(session)
                    start = time.perf_counter()
                    await root.sessions.flush(session)
                    flushed = (time.perf_counter() - start) / BATCH
                    if keep:
                        appends[mode].samples.append(sample)
                        flushes[mode].samples.append(flushed)
    return [
        row(bare, note="snapshot + validation, nothing published"),
        *(row(appends[mode], bare, note="+ session/event: buffered") for mode in MODES),
        *(row(flushes[mode], note=f"one durable batch per {BATCH} events") for mode in MODES),
    ]


def main() -> None:
    rows = anyio.run(_run)
    report(
        "p3_append",
        f"session.append with a persistence backend attached (batches of {BATCH}, µs per event)",
        rows,
        {"batch": BATCH, "rounds": ROUNDS},
    )


if __name__ == "__main__":
    main()
