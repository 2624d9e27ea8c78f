"""What a checkpoint waiting on the I/O thread holds: the coroutines from `sessions.flush` down to
the hand-off, and nothing that only passes an awaitable through (docs/performance.md)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import CoroutineType
from typing import Any

import anyio
import pytest

import plugins.session
import plugins.session_persistence_sqlite
from framework import Context
from plugins.session_persistence_sqlite.backend import SqliteBackend

pytestmark = pytest.mark.anyio


def _chain(coroutine: Any) -> list[str]:
    """The qualified names of the coroutines `coroutine` awaits, down to the I/O thread's."""
    names: list[str] = []
    while isinstance(coroutine, CoroutineType):
        names.append(coroutine.cr_code.co_qualname)
        if names[-1] == "IoThread.run":
            break
        coroutine = coroutine.cr_await
    return names


async def test_a_waiting_live_flush_holds_one_coroutine_per_layer_that_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    real = SqliteBackend._append_batch

    def held(self: SqliteBackend, *args: Any) -> Any:
        gate.wait()
        return real(self, *args)

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.session_persistence_sqlite, {"path": str(tmp_path / "s.db")})
        session = ctx.sessions.create("waiting", seed=[], meta={"cwd": "/w"})
        ctx.sessions.create("other", seed=[], meta={"cwd": "/w"})
        await ctx.sessions.flush(session)  # materialized, its writer lock held
        monkeypatch.setattr(SqliteBackend, "_append_batch", held)
        session.append("note", {"n": 1}, ignorable=True)
        flush = ctx.sessions.flush(session)

        async def wait() -> None:
            await flush

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                chain = _chain(flush)
                gate.set()
        finally:
            gate.set()
    assert chain == [
        "SessionStore.flush",
        "WriteController._run_drain",
        "WriteController._write_once",
        "LiveSessions._write_live",
        "ColdStore.append_durably",
        "SqliteBackend.append_batch",
        "IoThread.run",
    ]
