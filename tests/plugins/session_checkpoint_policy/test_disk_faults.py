"""R5 under the policy: a real I/O fault at a barrier fails closed, then heals (docs/quality.md)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from policy_probe import probe_stack

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy
import plugins.session_persistence_jsonl as jsonl
import plugins.tools
from framework import AbortController, Context
from plugins.llm import GenerateOptions
from plugins.session_persistence import mount_persistence
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.fileops import FileOps
from plugins.tools import ToolExecutionInput

pytestmark = pytest.mark.anyio


class FullDisk(FileOps):
    """`write` stores half of what it is given, then fails with ENOSPC, while `full` is set."""

    full = False

    def write(self, fd: int, data: memoryview) -> int:
        if self.full:
            super().write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(fd, data)


async def test_a_full_disk_fails_closed_at_both_boundaries_and_heals(tmp_path: Path) -> None:
    ops = FullDisk()
    ran: list[str] = []

    async def persistence(ctx: Context, _config: object) -> Any:
        backend = JsonlBackend(tmp_path, compression="none", fileops=ops)
        config = jsonl.Config(
            root=str(tmp_path), compression="none", write_batch_max_delay_ms=60_000
        )
        return await mount_persistence(ctx, backend, config)

    async with probe_stack(persistence, ran) as ctx:
        session = ctx.sessions.create("faulty", meta={"cwd": str(tmp_path)})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        log_path = Path(ctx.sessionPersistence.locate(session.header).path)
        size_before = log_path.stat().st_size

        ops.full = True
        session.append("step/start", {"turn": 1, "step": 1})
        options = GenerateOptions(provider="probe", model="m", messages=[], session_id="faulty")
        with pytest.raises(OSError, match="No space left on device"):
            async for _ in ctx.llm.stream(options):
                pass
        agent = SimpleNamespace(ctx=ctx, session=session)
        call = ToolExecutionInput(
            call_id="c1", name="probe", arguments={}, signal=AbortController().signal, agent=agent
        )
        result = await ctx.tools.execute(call)
        assert result.is_error is True
        assert result.content[0]["text"].startswith("Error: [Errno 28] No space left on device")
        assert ran == []  # neither the adapter nor the tool body ran
        assert log_path.stat().st_size == size_before  # each failed append was rolled back

        ops.full = False
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await ctx.sessions.flush(session)
        live = list(session.events)

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": str(tmp_path), "compression": "none"})
        stored = (await ctx.sessionPersistence.load("faulty")).events
    assert stored == live  # everything persisted exactly once, in order
