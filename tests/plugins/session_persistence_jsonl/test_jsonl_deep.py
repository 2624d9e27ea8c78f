"""R17 on JSONL: a 100k-deep JSON line is a clear error naming its line, never a RecursionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonl_helpers import backend, meta, turn, write

from plugins.session_persistence.errors import SessionPersistenceCorruptionError

pytestmark = pytest.mark.anyio

DEEP = b'{"type":"x/y","seq":8,"time":1,"data":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"


async def test_a_deep_line_before_a_turn_end_is_corruption_naming_it(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "none"), meta(), [turn(0)])
    later = await write(backend(tmp_path / "later", "none"), meta(), [turn(0), turn(8, 2)])
    tail = later.read_bytes()[len(path.read_bytes()) :]
    path.write_bytes(path.read_bytes() + DEEP + tail)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await backend(tmp_path, "none").load_stored("s1")
    assert (
        str(caught.value) == "corrupt session log: unparsable committed event at line 6"
    )  # 5 lines: 4 deltas pack into one


async def test_a_deep_last_line_is_a_torn_tail(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "none"), meta(), [turn(0)])
    path.write_bytes(path.read_bytes() + DEEP)
    stored = await backend(tmp_path, "none").load_stored("s1")
    assert stored is not None
    assert stored.events == turn(0)
    assert stored.torn_marker is not None


async def test_a_deep_header_is_corruption(tmp_path: Path) -> None:
    path = await write(backend(tmp_path, "none"), meta(), [turn(0)])
    path.write_bytes(b'{"type":"session","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    with pytest.raises(SessionPersistenceCorruptionError, match="header line is not valid JSON"):
        await backend(tmp_path, "none").load_stored("s1")
