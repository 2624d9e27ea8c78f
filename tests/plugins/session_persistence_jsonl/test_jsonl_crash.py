"""Real crashes and real concurrency: a SIGKILLed writer leaves a loadable prefix; parallel
sessions never mix."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from jsonl_helpers import MODES, backend, meta, turn

from plugins.session.repair import interrupted_turn_closers

pytestmark = pytest.mark.anyio

WRITER = """
import sys, anyio
sys.path.insert(0, sys.argv[3])
from jsonl_helpers import meta, turn
from plugins.session_persistence_jsonl import JsonlBackend

async def main() -> None:
    b = JsonlBackend(sys.argv[1], compression=sys.argv[2])
    await b.acquire_writer("s1")
    seq = 0
    while True:
        batch = turn(seq, turn_no=seq // 8 + 1, deltas=4)
        await b.append_batch(meta(), batch[:5], is_materialized=seq > 0)
        if seq == 0:
            # The first batch is durable: a kill from now on must leave at least it.
            print("durable", flush=True)
        await b.append_batch(meta(), batch[5:], is_materialized=True)
        seq += len(batch)

anyio.run(main)
"""


def kill_writer_after(root: Path, mode: str, delay: float) -> None:
    """Run the writer child, let it write for `delay` seconds after its first durable batch
    (a loaded machine may take longer than `delay` to get there), SIGKILL it."""
    here = Path(__file__).resolve().parent
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), mode, str(here)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=here.parents[2],
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "durable"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait()


@pytest.mark.parametrize("mode", MODES)
async def test_sigkilled_writer_leaves_a_loadable_prefix(tmp_path: Path, mode: str) -> None:
    for attempt, delay in enumerate((0.05, 0.15)):
        kill_writer_after(tmp_path / str(attempt) / "sessions", mode, delay)
        b = backend(tmp_path / str(attempt), mode)
        stored = await b.load_stored("s1")
        assert stored is not None
        events = stored.events
        expected = [
            e for start in range(0, len(events) + 8, 8) for e in turn(start, start // 8 + 1)
        ]
        assert events == expected[: len(events)]
        assert len(events) >= 5
        await b.commit_repair(stored.meta, stored.torn_marker, interrupted_turn_closers(events))
        repaired = await backend(tmp_path / str(attempt), mode).load_stored("s1")
        assert repaired is not None
        assert repaired.torn_marker is None
        assert interrupted_turn_closers(repaired.events) == []


@pytest.mark.parametrize("mode", MODES)
async def test_parallel_sessions_in_one_backend(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)

    async def drive(n: int) -> None:
        m = meta(f"s{n}", cwd=f"/p{n % 3}")
        await b.acquire_writer(m["id"])
        for k in range(6):
            await b.append_batch(m, turn(8 * k, k + 1), is_materialized=k > 0)

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(drive, n)
    for n in range(12):
        stored = await backend(tmp_path, mode).load_stored(f"s{n}")
        assert stored is not None
        assert stored.events == [e for k in range(6) for e in turn(8 * k, k + 1)]
    assert len(await b.list()) == 12
    await b.aclose()
