"""A cold read decodes each stored event once for the legacy upgrade and the validation
together (docs/performance.md, "Listing many sessions")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plugins.session_persistence import compact
from plugins.session_persistence.testing import running
from plugins.session_persistence_jsonl import JsonlBackend

pytestmark = pytest.mark.anyio

#: An interrupted turn (the inspect balances it with closers).
EVENTS: list[dict[str, Any]] = [
    {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
    {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
    {
        "type": "user/message",
        "seq": 2,
        "time": 1,
        "data": {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
        },
        "surfaceOp": "append",
    },
]


@pytest.mark.parametrize("mode", ["zstd", "none"])
async def test_inspect_decodes_each_stored_event_once(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = JsonlBackend(tmp_path, compression=mode)  # type: ignore[arg-type]
    meta = {"version": 0, "id": "s", "createdAt": 1, "cwd": "/p"}
    await backend.acquire_writer("s")
    await backend.append_batch(meta, EVENTS, is_materialized=False)
    await backend.release_writer("s")
    decoded: list[str] = []

    def counting(text: str) -> Any:
        decoded.append(text)
        return compact_loads(text)

    compact_loads = compact.loads
    monkeypatch.setattr(compact, "loads", counting)
    async with running(backend) as world:
        log = await world.service.inspect("s")
        assert len(decoded) == len(EVENTS)
        assert len(log.events) > len(EVENTS)  # balanced: closers follow
        assert list(log.events)[: len(EVENTS)] == await world.service.read_from("s", 0)
