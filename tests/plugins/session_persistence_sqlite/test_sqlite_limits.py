"""R17 on SQLite: a 100k-deep JSON row is a clear error naming its seq, never a RecursionError."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlite_helpers import backend, connect, meta, turn, write

from plugins.session_persistence.errors import SessionPersistenceCorruptionError

pytestmark = pytest.mark.anyio

DEEP = "[" * 100_000 + "]" * 100_000


async def test_a_deep_committed_row_is_corruption_naming_its_seq(tmp_path: Path) -> None:
    b = backend(tmp_path)
    await write(b, meta(), [turn(0), turn(8, 2)])
    await b.aclose()
    with connect(tmp_path) as db:
        db.execute("UPDATE events SET data = ? WHERE seq = 0", (DEEP,))
    fresh = backend(tmp_path)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        await fresh.load_stored("s1")
    assert str(caught.value) == "corrupt session log: invalid committed physical row at seq 0"
    await fresh.aclose()
