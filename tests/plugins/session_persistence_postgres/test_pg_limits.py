"""R17 on PostgreSQL: an id too long to be an index key is refused at create, clearly."""

from __future__ import annotations

import secrets

import pytest
from pg_helpers import backend, execute, meta, turn
from postgres_support import PostgresTarget

from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)
from plugins.session_persistence.testing import running
from plugins.session_persistence_postgres.connection import MAX_ID_BYTES

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_an_id_over_the_index_limit_fails_at_create(postgres: PostgresTarget) -> None:
    long_id = secrets.token_hex(1400)  # 2800 random bytes: over the ~2.7 KB btree entry limit
    expected = (
        f"session id of 2800 bytes is too long for session-persistence-postgres: ids are index "
        f"keys of at most {MAX_ID_BYTES} bytes of UTF-8 (starts with {long_id[:40]!r})"
    )
    async with running(backend(postgres)) as world:
        with pytest.raises(SessionPersistenceError) as caught:
            await world.service.create(meta(long_id))
        assert str(caught.value) == expected
        with pytest.raises(SessionPersistenceError, match="too long"):
            await world.service.append(long_id, turn(0))
        assert await world.service.list() == []


async def test_the_longest_accepted_id_round_trips(postgres: PostgresTarget) -> None:
    longest = "é" * (MAX_ID_BYTES // 2)
    b = backend(postgres)
    await b.append_batch(meta(longest), turn(0), is_materialized=False)
    stored = await b.load_stored(longest)
    assert stored is not None
    assert stored.events == turn(0)
    await b.aclose()


async def test_a_deep_committed_row_is_corruption_naming_its_seq(postgres: PostgresTarget) -> None:
    b = backend(postgres)
    await b.append_batch(meta(), turn(0) + turn(5, 2), is_materialized=False)
    deep = "[" * 100_000 + "]" * 100_000
    execute(postgres, "UPDATE dsh_events SET data = %s WHERE seq = 1", deep)
    with pytest.raises(SessionPersistenceCorruptionError, match="seq 1"):
        await backend(postgres).load_stored("s1")
    await b.aclose()
