"""The plugin module: Config, the overlay, and `sessionPersistence` mounted over SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlite_helpers import backend, db_path

import plugins.session
import plugins.session_persistence_sqlite as sqlite_plugin
from framework import Context
from framework.loader import boot, check_manifest
from plugins.session_persistence.errors import SessionLockedError

pytestmark = pytest.mark.anyio

CONFIG = Path(__file__).resolve().parents[3] / "config"
APP = CONFIG / "app.yml"
OVERLAY = CONFIG / "overlays" / "sqlite.yml"


def test_plugin_identity_and_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert sqlite_plugin.name == "session-persistence-sqlite"
    assert sqlite_plugin.inject == ["sessions"]
    config = sqlite_plugin.Config()
    assert (config.path, config.journal_mode, config.busy_timeout_ms) == (None, "wal", 5000)
    assert config.write_batch_max_delay_ms == 200
    assert config.prepared_session_cache_size == 5
    parsed = sqlite_plugin.Config.model_validate({"journalMode": "delete", "busyTimeoutMs": 7})
    assert (parsed.journal_mode, parsed.busy_timeout_ms) == ("delete", 7)
    bad_configs = (
        {"journal_mode": "memory"},
        {"pth": "/x"},
        {"busy_timeout_ms": -1},
        {"path": "relative/s.sqlite3"},
    )
    for bad in bad_configs:
        with pytest.raises(ValidationError):
            sqlite_plugin.Config.model_validate(bad)
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    assert sqlite_plugin.Config().backend().path == tmp_path / "sessions.sqlite3"
    monkeypatch.delenv("DSH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert sqlite_plugin.Config().backend().path == tmp_path / "home" / ".dsh" / "sessions.sqlite3"
    made = sqlite_plugin.Config(path="~/db/s.sqlite3")
    assert made.path == str(tmp_path / "home" / "db" / "s.sqlite3")
    assert made.backend().path == tmp_path / "home" / "db" / "s.sqlite3"


async def test_live_session_survives_a_restart_and_is_locked_while_live(tmp_path: Path) -> None:
    config = {"path": str(db_path(tmp_path))}
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(sqlite_plugin, config)
        session = ctx.sessions.create("live", meta={"cwd": "/home/u/proj"})
        session.append("turn/start", {"turn": 1})
        for text in ("a", "b", "c", "d"):
            session.append(
                "assistant/chunk",
                {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
            )
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert await ctx.sessions.flush(session) is True
        with pytest.raises(SessionLockedError):
            await backend(tmp_path).acquire_writer("live")
        expected = [dict(e) for e in session.events]
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(sqlite_plugin, config)
        loaded = await ctx.sessionPersistence.load("live")
        assert loaded.events == expected
        with pytest.raises(Exception, match="does not expose raw artifacts"):
            await ctx.sessionPersistence.read_raw("live")
    other = backend(tmp_path)
    await other.acquire_writer("live")  # released at teardown
    await other.aclose()


async def test_the_sqlite_overlay_swaps_the_backend(tmp_path: Path) -> None:
    manifest = tmp_path / "app.yml"
    manifest.write_text(
        "- id: sessions\n"
        "  name: dsh-session\n"
        "- id: session-persistence\n"
        "  name: dsh-session-persistence-jsonl\n"
    )
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    environ = {"DSH_HOME": str(home)}
    assert check_manifest(manifest, [OVERLAY], environ=environ) == []
    async with boot(manifest, [OVERLAY], environ=environ) as ctx:
        assert isinstance(ctx.sessionPersistence.backend, sqlite_plugin.SqliteBackend)
        session = ctx.sessions.create("s", meta={"cwd": "/p"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
    assert (home / "sessions.sqlite3").stat().st_mode & 0o777 == 0o600
    assert not (home / "sessions").exists()


async def test_the_shipped_app_runs_a_turn_on_sqlite(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir(mode=0o700)
    workspace.mkdir()
    environ = {"DSH_HOME": str(home), "DSH_WORKSPACE": str(workspace)}
    async with boot(APP, [OVERLAY], environ=environ) as ctx:
        handle = await ctx.agents.create("app-turn", meta={"cwd": str(workspace)})
        handle.agent.followup("Write the notes, please.")
        await handle.agent.when_idle()
        expected = [dict(e) for e in handle.agent.session.events]
    assert expected[-1]["type"] == "turn/end"
    reread = sqlite_plugin.SqliteBackend(home / "sessions.sqlite3")
    loaded = await reread.load_stored("app-turn")
    assert loaded is not None
    assert loaded.events == expected
    await reread.aclose()
