"""A cold prepare checks a stored log in one walk: the legacy upgrade, the format refusals,
validation and the crash closers share each event's decoding (docs/performance.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import plugins.session as session_plugin
import plugins.session_persistence.compact as compact
import plugins.session_persistence_jsonl as jsonl_plugin
from framework import Context
from plugins.session_persistence_jsonl import JsonlBackend

pytestmark = pytest.mark.anyio


def ev(seq: int, kind: str, data: Any, **envelope: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 1000 + seq, "data": data, **envelope}


LOG = [
    ev(0, "turn/start", {"turn": 1}),
    ev(1, "step/start", {"turn": 1, "step": 1}),
    ev(
        2,
        "user/message",
        {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
        },
        surfaceOp="append",
    ),
    ev(3, "step/end", {"turn": 1, "step": 1}),
]


async def test_a_cold_inspect_decodes_each_stored_event_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    meta = {"version": 0, "id": "s1", "createdAt": 5, "cwd": "/w"}
    backend = JsonlBackend(root, compression="none")
    try:
        await backend.append_batch(meta, LOG, is_materialized=False)
    finally:
        await backend.aclose()
    decoded: list[str] = []
    loads = compact.loads

    def counted(text: str) -> Any:
        decoded.append(text)
        return loads(text)

    monkeypatch.setattr(compact, "loads", counted)
    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        await ctx.plugin(jsonl_plugin, {"root": str(root), "compression": "none"})
        log = await ctx.sessionPersistence.inspect("s1")
    assert [e["type"] for e in log.events[4:]] == ["turn/end"]  # the open turn is balanced
    # One walk decodes each stored event once; the closers read the last one again. (Walking
    # for the upgrade, then for the validation, decoded each event twice.)
    assert len(decoded) == len(LOG) + 1
