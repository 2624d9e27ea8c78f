"""A second real process against a live SQLite session (R6), then SIGKILL of the owner (R1)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlite_helpers import backend, connect, db_path

import plugins.session
import plugins.session_persistence_sqlite as sqlite_plugin
from framework import Context
from plugins.session_persistence.errors import SessionLockedError

pytestmark = pytest.mark.anyio

CHILD = """
import sys, anyio
import plugins.session
import plugins.session_persistence_sqlite as sqlite_plugin
from framework import Context

async def main() -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(sqlite_plugin, {"path": sys.argv[1]})
        session = ctx.sessions.create("s1", meta={"cwd": "/home/u/proj"})
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        message = {
            "id": "a1", "role": "assistant",
            "content": [{"type": "tool-call", "id": "c1", "name": "grep", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        session.append(
            "assistant/message", {"turn": 1, "step": 1, "message": message},
            surface_op="append", source_event_seqs=[],
        )
        session.append(
            "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "grep", "arguments": {}}
        )
        await ctx.sessions.flush(session)
        print("ready", flush=True)
        await anyio.sleep(120)

anyio.run(main)
"""


def spawn_owner(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def dump(root: Path) -> list[tuple[object, ...]]:
    with connect(root) as db:
        return db.execute("SELECT * FROM events ORDER BY seq").fetchall()


async def test_a_second_process_is_locked_out_until_the_owner_is_killed(tmp_path: Path) -> None:
    path = db_path(tmp_path)
    child = spawn_owner(path)
    config = {"path": str(path)}
    try:
        owned = dump(tmp_path)
        text = (
            f'session "s1" is locked by another writer '
            f"(pid {child.pid} on host {socket.gethostname()})"
        )
        async with Context() as ctx:
            await ctx.plugin(plugins.session)
            await ctx.plugin(sqlite_plugin, config)
            service = ctx.sessionPersistence
            inspected = await service.inspect("s1")  # reads never lock
            assert [e["type"] for e in inspected.events][-2:] == ["step/end", "turn/end"]
            for attempt in (service.load("s1"), service.prepare("s1")):
                with pytest.raises(SessionLockedError) as caught:
                    await attempt
                assert str(caught.value) == text
                assert (caught.value.pid, caught.value.host) == (child.pid, socket.gethostname())
        assert dump(tmp_path) == owned
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(sqlite_plugin, config)
        loaded = await ctx.sessionPersistence.load("s1")
        kinds = [e["type"] for e in loaded.events]
        assert kinds == [
            "turn/start",
            "step/start",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
        ]
        assert loaded.events[4]["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        preparation = await ctx.sessionPersistence.prepare("s1")
        session = preparation.session
        ctx.sessions.enter(session)
        ctx.sessions.announce(session)
        session.append("turn/start", {"turn": 2})
        await ctx.sessions.flush(session)
    final = await backend(tmp_path).load_stored("s1")
    assert final is not None
    assert [e["type"] for e in final.events][-2:] == ["session/end-seed", "turn/start"]
    with connect(tmp_path) as db:
        assert db.execute("SELECT pid FROM session_locks").fetchall() == []
    assert os.getpid() != child.pid
