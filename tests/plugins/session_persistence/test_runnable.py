"""`runnable.others_runnable`: whether a drain's loop pass could let another task run."""

from __future__ import annotations

import anyio
import pytest
import sniffio

from plugins.session_persistence.runnable import others_runnable

pytestmark = pytest.mark.anyio


async def test_a_scheduled_task_is_runnable_and_a_lone_task_on_asyncio_is_not() -> None:
    await anyio.wait_all_tasks_blocked()
    alone = others_runnable()
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep, 0)
        assert others_runnable()
    # Trio's current batch of tasks is visible nowhere: there it is always True.
    assert alone is (sniffio.current_async_library() == "trio")
