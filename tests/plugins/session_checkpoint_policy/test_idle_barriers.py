"""P8: a barrier with nothing new to make durable costs no write and no fsync.

A real stack (sessions, JSONL raw with a 60 s write-behind window so only barriers write, the
policy): after one checkpoint, every further barrier of the same session with nothing appended
in between resolves without touching the disk; the next appended event is written by the next
barrier, once.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy as policy
import plugins.session_persistence_jsonl
import plugins.tools
from framework import AbortController, Context

pytestmark = pytest.mark.anyio


async def test_barriers_with_nothing_new_do_not_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []
    real = os.fsync

    def counting(fd: Any) -> None:
        fsyncs.append(fd)
        real(fd)

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(
            plugins.session_persistence_jsonl,
            {"root": str(tmp_path), "compression": "none", "write_batch_max_delay_ms": 60_000},
        )
        await ctx.plugin(policy)
        session = ctx.sessions.create("idle-barriers", meta={"cwd": str(tmp_path)})
        agent = SimpleNamespace(ctx=ctx, session=session)

        async def pre_step(step: int) -> None:
            payload = SimpleNamespace(
                agent=agent, messages=[], turn=1, step=step, signal=AbortController().signal
            )

            async def enter(*_: Any) -> None:
                return None

            await ctx.waterfall("agent/pre-step", payload, inner=enter)

        session.append("turn/start", {"turn": 1})
        await pre_step(1)  # materializes the log
        monkeypatch.setattr(os, "fsync", counting)
        for step in range(2, 6):
            await pre_step(step)
        assert fsyncs == []
        session.append("step/start", {"turn": 1, "step": 5})
        await pre_step(6)
        await pre_step(7)
        assert len(fsyncs) == 1
