"""Exact spec texts of the checkpoint policy: the boot line without a backend, the
metrics DEBUG line in full and the strict variant's `llm/stream:interval` barrier (§6.2)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_policy import harness
from test_strict import Clock, SlowAdapter

import plugins.llm
import plugins.session
import plugins.session_checkpoint_policy.barriers as barriers
import plugins.session_checkpoint_policy.strict as strict
import plugins.tools
from framework import BootError, Context, boot
from plugins.llm import GenerateOptions
from plugins.session_checkpoint_policy import CheckpointFlushed

pytestmark = pytest.mark.anyio

LOGGER = "dsh.session_checkpoint_policy"


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


async def test_debug_lines_are_exact(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger=LOGGER)
    async with harness() as h:
        await h.ctx.tools.execute(h.call())
    async with harness(fail=True) as h:
        await h.ctx.tools.execute(h.call())
    got = lines(caplog)
    assert len(got) == 2
    assert re.fullmatch(
        r"checkpoint barrier=tools/execute session=live call=call-1 ok=True ms=\d+\.\d{3}", got[0]
    )
    assert re.fullmatch(
        r"checkpoint barrier=tools/execute session=live call=call-1 ok=False ms=\d+\.\d{3}", got[1]
    )


async def test_strict_interval_barrier_name_and_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger=LOGGER)
    clock = Clock()
    adapter = SlowAdapter(clock)
    metrics: list[CheckpointFlushed] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(barriers, "now", clock)
        async with Context() as ctx:
            await ctx.plugin(plugins.session)
            await ctx.plugin(plugins.llm)
            await ctx.plugin(plugins.tools)
            await ctx.plugin(lambda c, _: c.provide("sessionPersistence", SimpleNamespace()))
            await ctx.plugin(strict, {"stream_checkpoint_ms": 1000})
            session = ctx.sessions.create("s")
            ctx.on("checkpoint/flushed", metrics.append)
            ctx.llm.register_adapter("slow", adapter)
            options = GenerateOptions(provider="slow", model="m", messages=[], session_id="s")
            chunk: Any
            async for chunk in ctx.llm.stream(options):
                session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
    assert [(m.session_id, m.barrier, m.call_id, m.ok) for m in metrics] == [
        ("s", "llm/stream", None, True),
        ("s", "llm/stream:interval", None, True),
    ]
    got = lines(caplog)
    assert re.fullmatch(
        r"checkpoint barrier=llm/stream session=s call=- ok=True ms=\d+\.\d{3}", got[0]
    )
    assert re.fullmatch(
        r"checkpoint barrier=llm/stream:interval session=s call=- ok=True ms=\d+\.\d{3}", got[1]
    )


async def test_without_a_backend_boot_names_the_missing_service(tmp_path: Path) -> None:
    manifest = tmp_path / "app.yml"
    manifest.write_text(
        "- {id: sessions, name: dsh-session}\n"
        "- {id: llm, name: dsh-llm}\n"
        "- {id: tools, name: dsh-tools}\n"
        "- id: session-checkpoints\n"
        "  name: '@deepseek-ai/dsh-session-checkpoint-policy'\n"
    )
    with pytest.raises(BootError) as caught:
        async with boot(manifest):
            pass
    assert str(caught.value) == (
        f"failed to boot {manifest}: 1 entries did not start\n"
        "  session-checkpoints (@deepseek-ai/dsh-session-checkpoint-policy): "
        "waiting for services: sessionPersistence"
    )
