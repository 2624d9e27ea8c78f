"""Exact spec texts of the persistence seam that other tests pin only by prefix."""

from __future__ import annotations

import pytest

from plugins.session_persistence import SessionPersistenceCorruptionError
from plugins.session_persistence.testing import complete_turn, meta, running
from plugins.session_persistence.testing.memory import MemoryBackend, MemoryStorage

pytestmark = pytest.mark.anyio


async def test_failed_validation_text_wraps_the_validation_error_exactly() -> None:
    storage = MemoryStorage()
    broken = complete_turn(0)
    broken[3]["surfaceOp"] = "prepend"
    async with running(MemoryBackend(storage)) as w:
        await w.service.create(meta("s1"))
        await w.service.append("s1", broken)
    async with running(MemoryBackend(storage)) as w:
        for call in (w.service.load, w.service.inspect):
            with pytest.raises(SessionPersistenceCorruptionError) as caught:
                await call("s1")
            cause = caught.value.__cause__
            assert cause is not None
            assert "surfaceOp" in str(cause)
            assert str(caught.value) == f'stored session "s1" failed validation: {cause}'
