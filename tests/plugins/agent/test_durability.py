"""What `when_idle()` promises about durability, over the real JSONL backend."""

from __future__ import annotations

from typing import Any

import pytest
from agent_helpers import stack, types

from plugins.session_persistence.errors import SessionPersistenceError

pytestmark = pytest.mark.anyio


async def test_the_idle_checkpoint_makes_turn_end_durable(tmp_path: Any) -> None:
    for flush_on_idle in (True, False):
        root = tmp_path / str(flush_on_idle)
        async with stack(
            [{"text": "ok"}],
            root=root,
            agent={"flush_on_idle": flush_on_idle},
            persistence={"write_batch_max_delay_ms": 60000},
        ) as ctx:
            handle = await ctx.agents.create("durable", meta={"cwd": str(tmp_path)})
            handle.agent.followup("go")
            await handle.agent.when_idle()
            if flush_on_idle:
                stored = await ctx.sessionPersistence.read_from("durable", 0)
                assert [e["type"] for e in stored] == types(handle.agent.session)
                assert stored[-1]["type"] == "turn/end"
            else:  # only the (60 s) write-behind would have written it: nothing is stored yet
                with pytest.raises(SessionPersistenceError, match='session "durable" not found'):
                    await ctx.sessionPersistence.read_from("durable", 0)
            await handle.dispose()
