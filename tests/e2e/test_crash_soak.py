"""Randomized crash soak of the checkpoint policy over JSONL (docs/quality.md, R2).

Many short child processes (`soak_child.py`) drive ONE session in turn: each resumes it, runs
replayed turns (reasoning, parallel and exclusive tool calls, text) with a 5 ms write-behind
window so background writes and the policy's barriers interleave, and is SIGKILLed at a random
moment (sometimes while it is still booting or repairing). After each kill a fresh context loads
the log and checks: it loads; seqs are contiguous from 0; every event a returned flush had
acknowledged is present; every tool body that started has a durable `tool/call`; everything an
earlier load returned is still there, unchanged; turns and steps are balanced; every `tool/call`
has exactly one `tool/result`.

Bounded by `DSH_SOAK_KILLS` (default 40) kills and `DSH_SOAK_SECONDS` (default 90) seconds;
`DSH_SOAK_SEED` replays a run (the seed is printed, and named in every failure).

asyncio only for the parent: the system under test is the child process, whose event loop is
drawn at random per run (asyncio or trio); running the parent's few loads on trio as well would
double the soak's time for no extra coverage (backend parity of loads is tested elsewhere).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import plugins.session
import plugins.session_persistence_jsonl
from framework import Context

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fcntl locks are POSIX-only"),
]

CHILD = Path(__file__).with_name("soak_child.py")
SESSION_ID = "crash-soak"
EARLY_KILLS = 0.15  # share of kills that do not wait for the child to be driving the session


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Soak:
    """The soak's state across kills: what was acknowledged, what earlier loads returned."""

    root: Path
    rng: random.Random
    acknowledged: int = 0
    #: Call ids whose tool body started (so whose `tool/call` must be durable).
    bodies: set[str] = field(default_factory=set)
    known: list[dict[str, Any]] = field(default_factory=list)
    kills: int = 0
    early: int = 0
    loads: int = 0

    async def run_once(self) -> None:
        """Spawn a child, SIGKILL it at a random moment, then check the log."""
        run = self.kills
        self.kill_one(run)
        await self.check(run)

    def kill_one(self, run: int) -> None:
        """Run child `run` until a random moment, SIGKILL it, and collect its acknowledgements."""
        acks = self.root / f"acks-{run}.txt"
        loop = self.rng.choice(["asyncio", "trio"])
        args = [sys.executable, str(CHILD), str(self.root), str(acks), str(run)]
        args += [str(self.rng.randrange(2**32)), loop]
        child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if self.rng.random() < EARLY_KILLS:
                self.early += 1
                alive_for(child, self.rng.uniform(0.0, 0.8))
            else:
                until_ready(child, acks)
                alive_for(child, self.rng.uniform(0.0, 0.3))
            child.send_signal(signal.SIGKILL)
            _, stderr = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL, (
            f"run {run} ({loop}) exited with {child.returncode}:\n{stderr.decode(errors='replace')}"
        )
        self.kills += 1
        lines = acks.read_text().splitlines() if acks.exists() else []
        assert "script-exhausted" not in lines, f"run {run} ran out of script"
        counts = [int(line.split()[1]) for line in lines if line.startswith("ack ")]
        self.acknowledged = max([self.acknowledged, *counts])
        self.bodies.update(line.split()[1] for line in lines if line.startswith("body "))

    async def check(self, run: int) -> None:
        events = await load(self.root)
        if events is None:
            assert self.acknowledged == 0, f"run {run}: session missing after acknowledged flushes"
            return
        self.loads += 1
        assert_contiguous(events)
        assert len(events) >= self.acknowledged, (
            f"run {run}: {self.acknowledged} events acknowledged, only {len(events)} loaded"
        )
        changed = next(
            (i for i, (a, b) in enumerate(zip(self.known, events, strict=False)) if a != b), None
        )
        assert changed is None, f"run {run}: an earlier load's event at seq {changed} changed"
        assert len(events) >= len(self.known), f"run {run}: an earlier load's events vanished"
        assert_balanced(events)
        assert_one_result_per_call(events)
        durable_calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call"}
        missing = sorted(self.bodies - durable_calls)
        assert not missing, f"run {run}: tool bodies ran without a durable tool/call: {missing}"
        self.known = events


def alive_for(child: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait `seconds` unless the child exits first (which the caller reports)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(min(0.005, max(0.0, deadline - time.monotonic())))


def until_ready(child: subprocess.Popen[bytes], acks: Path) -> None:
    """Wait until the child drives the session (its `ready` line), at most 30 s."""
    deadline = time.monotonic() + 30
    while not (acks.exists() and "ready\n" in acks.read_text()):
        if child.poll() is not None or time.monotonic() > deadline:
            return  # the caller kills it and reports the exit status
        time.sleep(0.005)


async def load(root: Path) -> list[dict[str, Any]] | None:
    """The session's events as a fresh process would load them (None: never materialized)."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(
            plugins.session_persistence_jsonl, {"root": str(root), "compression": "none"}
        )
        stored = {header["id"] for header in await ctx.sessionPersistence.list()}
        if SESSION_ID not in stored:
            return None
        log = await ctx.sessionPersistence.load(SESSION_ID)
        return list(log.events)


def assert_contiguous(events: Sequence[dict[str, Any]]) -> None:
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(len(events))), "seqs are not contiguous from 0 without duplicates"


def assert_balanced(events: Sequence[dict[str, Any]]) -> None:
    """Turns alternate `turn/start` … `turn/end`; steps open and close inside a turn."""
    turn_open = step_open = False
    for event in events:
        kind, seq = event["type"], event["seq"]
        if kind == "turn/start":
            assert not turn_open, f"turn/start at seq {seq} inside an open turn"
            turn_open = True
        elif kind == "turn/end":
            assert turn_open, f"turn/end at seq {seq} without a turn"
            assert not step_open, f"turn/end at seq {seq} inside an open step"
            turn_open = False
        elif kind == "step/start":
            assert turn_open, f"step/start at seq {seq} outside a turn"
            assert not step_open, f"step/start at seq {seq} inside an open step"
            step_open = True
        elif kind == "step/end":
            assert step_open, f"step/end at seq {seq} without a step"
            step_open = False
    assert not turn_open, "the loaded log ends inside a turn"


def assert_one_result_per_call(events: Sequence[dict[str, Any]]) -> None:
    """Every `tool/call` has exactly one later `tool/result` naming it; a result without a
    `tool/call` is the repair's `TOOL_NOT_STARTED` for a call whose `tool/call` was not durable."""
    calls = {e["seq"]: e["data"]["callId"] for e in events if e["type"] == "tool/call"}
    results: dict[str, int] = {}
    for event in events:
        if event["type"] != "tool/result":
            continue
        call_id = event["data"]["message"]["source"]["callId"]
        results[call_id] = results.get(call_id, 0) + 1
        sources = event.get("sourceEventSeqs")
        if sources is None:
            assert call_id not in calls.values(), f"seq {event['seq']}: result names no tool/call"
            assert event["data"]["error"]["code"] == "TOOL_NOT_STARTED"
            continue
        (source,) = sources
        assert calls.get(source) == call_id, f"tool/result at seq {event['seq']} names no call"
        assert source < event["seq"]
    assert all(count == 1 for count in results.values()), "a call has several results"
    assert all(call_id in results for call_id in calls.values()), "a tool/call has no result"


async def test_r2_randomized_crash_soak(tmp_path: Path) -> None:
    seed = int(os.environ.get("DSH_SOAK_SEED", random.randrange(2**32)))
    kills = int(os.environ.get("DSH_SOAK_KILLS", "40"))
    budget = float(os.environ.get("DSH_SOAK_SECONDS", "90"))
    soak = Soak(tmp_path, random.Random(seed))
    started = time.monotonic()
    try:
        # Stop early rather than overrun: a run takes about a second (boot + drive + load).
        while soak.kills < kills and time.monotonic() - started < budget - 3:
            await soak.run_once()
    except AssertionError as error:
        raise AssertionError(f"crash soak seed {seed} (DSH_SOAK_SEED={seed}): {error}") from error
    elapsed = time.monotonic() - started
    print(
        f"crash soak seed {seed}: {soak.kills} kills ({soak.early} early), {soak.loads} loads, "
        f"{len(soak.known)} events, {soak.acknowledged} acknowledged, {elapsed:.1f} s"
    )
    assert soak.kills >= min(kills, 5), f"crash soak seed {seed}: only {soak.kills} kills"
    assert soak.acknowledged > 0, f"crash soak seed {seed}: no flush was ever acknowledged"
