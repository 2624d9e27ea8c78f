"""`exec.idempotency_key`: derived from the store's identity, the session id and the call id, so
it is the same for one durable call in any process and different for any other call."""

from __future__ import annotations

import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

import plugins.session
import plugins.session_persistence_jsonl as jsonl
import plugins.session_persistence_sqlite as sqlite
from framework import Context
from plugins.session_persistence import SessionPersistenceError
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_sqlite import SqliteBackend
from plugins.tools import idempotency_key

pytestmark = pytest.mark.anyio


def test_the_key_is_deterministic_and_names_each_part() -> None:
    key = idempotency_key("store", "session", "call-1")
    assert key == idempotency_key("store", "session", "call-1")
    assert key.startswith("dsh-")
    assert len(key) == 36
    others = {
        idempotency_key("other", "session", "call-1"),
        idempotency_key("store", "other", "call-1"),
        idempotency_key("store", "session", "call-2"),
        # no separator ambiguity: the parts cannot run into each other
        idempotency_key("store", "session:call", "1"),
        idempotency_key("store:session", "call", "1"),
    }
    assert key not in others
    assert len(others) == 5


async def test_jsonl_identity_is_a_private_file_kept_across_instances(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    first = await JsonlBackend(root).store_identity()
    again = await JsonlBackend(root).store_identity()
    other = await JsonlBackend(tmp_path / "elsewhere").store_identity()
    assert first == again != other
    path = root / "store-id"
    assert path.read_text() == first + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert [p.name for p in root.iterdir()] == ["store-id"]  # no temp file left behind


def test_concurrent_first_uses_agree_on_one_identity(tmp_path: Path) -> None:
    import anyio

    root = tmp_path / "sessions"
    seen: list[str] = []
    barrier = threading.Barrier(6)

    def use() -> None:
        barrier.wait()
        seen.append(anyio.run(JsonlBackend(root).store_identity))

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(seen) == 6
    assert len(set(seen)) == 1


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda p, o: os.symlink(o, p), "is a symbolic link; refusing to follow it"),
        (lambda p, o: (p.write_text("0" * 32 + "\n"), p.chmod(0o664)), "writable by group"),
        (lambda p, o: (p.write_text("not an id\n"), p.chmod(0o600)), "is malformed"),
    ],
)
async def test_a_hostile_or_damaged_identity_file_is_refused(
    tmp_path: Path, prepare: Any, message: str
) -> None:
    root = tmp_path / "sessions"
    root.mkdir(mode=0o700)
    outside = tmp_path / "outside"
    outside.write_text("f" * 32 + "\n")
    outside.chmod(0o600)
    prepare(root / "store-id", outside)
    with pytest.raises(SessionPersistenceError, match=re.escape(message)):
        await JsonlBackend(root).store_identity()


async def test_sqlite_identity_is_the_databases_store_id(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    first = SqliteBackend(home / "a.sqlite3")
    try:
        identity = await first.store_identity()
    finally:
        await first.aclose()
    again = SqliteBackend(home / "a.sqlite3")
    other = SqliteBackend(home / "b.sqlite3")
    try:
        assert await again.store_identity() == identity
        assert await other.store_identity() != identity
    finally:
        await again.aclose()
        await other.aclose()


async def test_sessions_identity_follows_the_persistence_backend(tmp_path: Path) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        memory = await ctx.sessions.identity()
        assert memory == await ctx.sessions.identity()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        assert await ctx.sessions.identity() != memory  # another store, another id
    for plugin, config in [
        (jsonl, {"root": str(tmp_path / "sessions")}),
        (sqlite, {"path": str(tmp_path / "db" / "s.sqlite3")}),
    ]:
        async with Context() as ctx:
            await ctx.plugin(plugins.session)
            await ctx.plugin(plugin, config)
            persisted = await ctx.sessions.identity()
            assert persisted == await ctx.sessionPersistence.identity()
            assert persisted == await ctx.sessionPersistence.backend.store_identity()


async def test_a_jsonl_backend_reads_its_identity_once(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    backend = JsonlBackend(root)
    identity = await backend.store_identity()
    (root / "store-id").unlink()
    # No second read on the I/O thread per tool step; the id of a running store stays its id.
    assert await backend.store_identity() == identity
    assert not (root / "store-id").exists()
    assert await JsonlBackend(root).store_identity() != identity
