"""`owners`, the listing's batch probe, on a backend that probes one id at a time."""

from __future__ import annotations

import pytest

from plugins.session_persistence import Owner
from plugins.session_persistence.testing import complete_turn, running, store
from plugins.session_persistence.testing.memory import MemoryBackend, MemoryStorage

pytestmark = pytest.mark.anyio


async def test_owners_asks_owner_of_each_id_where_the_backend_has_no_batch() -> None:
    storage = MemoryStorage()
    other = MemoryBackend(storage, pid=2)
    async with running(MemoryBackend(storage)) as world:
        for name in ("free", "elsewhere"):
            await store(world, name, complete_turn(0))
        await other.acquire_writer("elsewhere")
        ids = ["free", "elsewhere", "missing"]
        found = await world.service.owners(ids)
        assert found == {"free": None, "elsewhere": Owner(2, "memory"), "missing": None}
        assert found == {i: await world.service.owner(i) for i in ids}
    await other.aclose()
