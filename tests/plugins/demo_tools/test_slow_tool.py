"""`sleep_then_write`: waits, then writes; an abort during the wait stops it, writing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import plugins.demo_tools as demo_tools
import plugins.tools as tools_plugin
from framework import AbortController, Context
from plugins.tools import ToolExecutionInput, ToolExecutionResult

pytestmark = pytest.mark.anyio


async def run(root: Context, args: Any, signal: Any = None) -> ToolExecutionResult:
    signal = signal if signal is not None else AbortController().signal
    result: ToolExecutionResult = await root.tools.execute(
        ToolExecutionInput("call-slow", "sleep_then_write", args, signal)
    )
    return result


async def mounted(root: Context, space: Path) -> None:
    await root.plugin(tools_plugin)
    ledger = str(space.parent / "ledger.jsonl")
    await root.plugin(demo_tools, {"workspace": str(space), "ledger_path": ledger})


async def test_it_writes_after_the_wait(tmp_path: Path) -> None:
    async with Context() as root:
        await mounted(root, tmp_path)
        started = anyio.current_time()
        result = await run(root, {"path": "slow.txt", "content": "late\n", "seconds": 0.2})
        elapsed = anyio.current_time() - started
    assert elapsed >= 0.2
    assert result.value == {"path": "slow.txt", "bytes": 5}
    assert (tmp_path / "slow.txt").read_text() == "late\n"


async def test_an_abort_during_the_wait_writes_nothing(tmp_path: Path) -> None:
    controller = AbortController()
    box: list[ToolExecutionResult] = []
    async with Context() as root:
        await mounted(root, tmp_path)
        args = {"path": "slow.txt", "content": "late\n", "seconds": 30}
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    box.append(await run(root, args, controller.signal))

                tg.start_soon(call)
                await anyio.sleep(0.1)
                controller.abort()
    assert not (tmp_path / "slow.txt").exists()
    (result,) = box
    assert result.error is not None
    assert result.error.info == {"name": "NotWrittenError", "code": "NOT_WRITTEN"}
    assert result.error.message.endswith('of a 30s wait: "slow.txt" was not written')


@pytest.mark.parametrize("seconds", [-1, 3601])
async def test_the_wait_is_bounded(tmp_path: Path, seconds: float) -> None:
    async with Context() as root:
        await mounted(root, tmp_path)
        result = await run(root, {"path": "x", "content": "", "seconds": seconds})
    assert result.error is not None
    assert result.error.info == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert result.error.message == (
        'invalid arguments: "arguments.seconds" must be between 0 and 3600'
    )
