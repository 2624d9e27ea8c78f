"""The file checks of one append to a kept descriptor: the path and the lock still name the held
files (two `lstat`s), the size is where it was left (one `lseek`); the held file's identity is
the `fstat` taken when the descriptor was opened (the guarantees: test_jsonl_fsguard.py,
test_jsonl_locking.py)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonl_helpers import event, meta

from plugins.session_persistence_jsonl import JsonlBackend

pytestmark = pytest.mark.anyio


def counting(calls: Counter[str], name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return real(*args, **kwargs)

    return call


async def test_an_append_to_a_kept_descriptor_makes_no_fstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with JsonlBackend(tmp_path, compression="none") as backend:
        await backend.acquire_writer("s1")
        header = meta()
        await backend.append_batch(
            header, [event(0, "turn/start", {"turn": 1})], is_materialized=False
        )
        await backend.append_batch(
            header, [event(1, "step/start", {"turn": 1})], is_materialized=True
        )
        calls: Counter[str] = Counter()
        for name in ("fstat", "lstat", "lseek"):
            monkeypatch.setattr(os, name, counting(calls, name, getattr(os, name)))
        await backend.append_batch(
            header, [event(2, "step/end", {"turn": 1})], is_materialized=True
        )
        assert calls == Counter({"lstat": 2, "lseek": 1})
        monkeypatch.undo()
        stored = await backend.load_stored("s1")
        assert stored is not None
        assert [e["seq"] for e in stored.events] == [0, 1, 2]
