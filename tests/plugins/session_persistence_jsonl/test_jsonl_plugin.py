"""The plugin module: Config, and `sessionPersistence` mounted over the JSONL backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonl_helpers import backend
from pydantic import ValidationError

import plugins.session
import plugins.session_persistence_jsonl as jsonl
from framework import Context
from plugins.session_persistence.errors import SessionLockedError

pytestmark = pytest.mark.anyio


def test_plugin_identity_and_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert jsonl.name == "session-persistence-jsonl"
    assert jsonl.inject == ["sessions"]
    config = jsonl.Config()
    assert (config.root, config.compression, config.pack_chunks) == (None, "zstd", True)
    assert config.write_batch_max_delay_ms == 200
    assert config.prepared_session_cache_size == 5
    assert (
        jsonl.Config.model_validate({"packChunks": False, "writeBatchMaxDelayMs": 5}).pack_chunks
        is False
    )
    assert jsonl.Config(root="~/logs").root == str(Path.home() / "logs")
    bad_configs = (
        {"compression": "gzip"},
        {"rooot": "/x"},
        {"write_batch_max_delay_ms": 0},
        {"root": "relative/logs"},
    )
    for bad in bad_configs:
        with pytest.raises(ValidationError):
            jsonl.Config.model_validate(bad)
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    made = jsonl.Config(compression="none").backend()
    assert made.root == tmp_path / "sessions"
    assert made.compression == "none"


@pytest.mark.parametrize("mode", ["none", "zstd"])
async def test_live_session_survives_a_restart_and_is_locked_while_live(
    tmp_path: Path, mode: str
) -> None:
    config = {"root": str(tmp_path / "sessions"), "compression": mode}
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, config)
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
            await backend(tmp_path, mode).acquire_writer("live")
        expected = [dict(e) for e in session.events]
    log = (
        tmp_path
        / "sessions"
        / "--home-u-proj--"
        / "live"
        / ("session.jsonl.zstd" if mode == "zstd" else "session.jsonl")
    )
    assert log.exists()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, config)
        loaded = await ctx.sessionPersistence.load("live")
        assert loaded.events == expected
    other = backend(tmp_path, mode)
    await other.acquire_writer("live")  # released at teardown
    await other.aclose()
