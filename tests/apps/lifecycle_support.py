"""Backends for the session-lifecycle command tests (`dsh fork/doctor/rm/prune/copy/export`).

`Backend` names one storage the real `dsh` reaches through `patches` and the test reaches
through `factory(**kwargs)`: `seed` stores events there directly, `hold` runs a child process
owning a live session (killed on exit: what a crash leaves behind).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from dsh_sandbox import Sandbox
from postgres_support import PostgresTarget

from plugins.session_persistence.backend import JsonObject, PersistenceBackend
from plugins.session_persistence.testing import T0, event, open_step_turn, running
from plugins.session_persistence_jsonl import JsonlBackend, frames
from plugins.session_persistence_jsonl.backend import header_line

SQLITE = Path(__file__).parents[2] / "config" / "overlays" / "sqlite.yml"
PG_OVERLAY = """\
- id: session-persistence
  disabled: true
- insert:
    - id: session-persistence-postgres
      name: dsh-session-persistence-postgres
      config:
        dsn: {dsn}
        schema: {schema}
"""


def _build(factory: str, kwargs: dict[str, Any]) -> PersistenceBackend:
    module, _, attribute = factory.partition(":")
    backend: PersistenceBackend = getattr(importlib.import_module(module), attribute)(**kwargs)
    return backend


def tool_turn(
    start: int, turn: int, calls: list[tuple[str, str]], usage: int = 0
) -> list[JsonObject]:
    """A completed turn from seq `start` whose one step asks for `calls` (`(call id, tool
    name)`), logs each as started and answers it; with `usage`, a usage chunk of `usage` input
    and `usage // 10` output tokens."""
    events = open_step_turn(start, turn)
    seq = start + 3
    if usage:
        chunk = {"type": "usage", "usage": {"inputTokens": usage, "outputTokens": usage // 10}}
        events.append(event(seq, "assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk}))
        seq += 1
    blocks = [
        {"type": "tool-call", "id": call_id, "name": name, "arguments": '{"path":"a.txt"}'}
        for call_id, name in calls
    ]
    message = {
        "id": f"assistant-{seq}",
        "role": "assistant",
        "content": blocks or [{"type": "text", "text": f"answer {turn}"}],
        "source": {"kind": "model", "provider": "replay", "model": "replay"},
    }
    data = {"turn": turn, "step": 1, "message": message}
    events.append(event(seq, "assistant/message", data, surface_op="append", source=[]))
    seq += 1
    for call_id, name in calls:
        call = {"turn": turn, "step": 1, "callId": call_id, "name": name}
        events.append(event(seq, "tool/call", {**call, "arguments": '{"path":"a.txt"}'}))
        result = {
            "id": f"result-{call_id}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "done"}],
                }
            ],
        }
        data = {"turn": turn, "step": 1, "message": result}
        events.append(event(seq + 1, "tool/result", data, surface_op="append", source=[seq]))
        seq += 2
    events.append(event(seq, "step/end", {"turn": turn, "step": 1}))
    events.append(event(seq + 1, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    return events


KINDS = ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass(frozen=True)
class Backend:
    """One storage: `patches` for `dsh`, `factory` and `kwargs` for the test itself."""

    kind: str
    factory: str
    kwargs: dict[str, Any]
    patches: tuple[str, ...]
    overlay: Path | None

    def seed(self, session_id: str, events: list[JsonObject], cwd: str, created_at: int) -> None:
        """Store `events` under `session_id` (header `cwd`, `createdAt`)."""

        async def store() -> None:
            async with running(_build(self.factory, self.kwargs)) as w:
                await w.service.create({"id": session_id, "createdAt": created_at, "cwd": cwd})
                await w.service.append(session_id, events)

        anyio.run(store)

    @contextmanager
    def hold(self, env: dict[str, str], session_id: str, events: list[JsonObject]) -> Iterator[int]:
        """A child process owning live `session_id` with `events` flushed; yields its pid."""
        spec = {
            "factory": self.factory,
            "kwargs": self.kwargs,
            "session": session_id,
            "cwd": "/tmp",
            "events": events,
        }
        command = [sys.executable, "-m", "plugins.session_persistence.testing.child", "hold"]
        child = subprocess.Popen(
            [*command, json.dumps(spec)], stdout=subprocess.PIPE, env=env, text=True
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            yield child.pid
        finally:
            child.kill()
            child.wait()


def make_backend(kind: str, dsh: Sandbox, request: pytest.FixtureRequest | None = None) -> Backend:
    """The `kind` storage inside `dsh`'s sandbox (PostgreSQL: a fresh schema)."""
    if kind == "jsonl":
        factory = "plugins.session_persistence_jsonl:JsonlBackend"
        return Backend(kind, factory, {"root": str(dsh.home / "sessions")}, (), None)
    if kind == "sqlite":
        dsh.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        factory = "plugins.session_persistence_sqlite:SqliteBackend"
        kwargs = {"path": str(dsh.home / "sessions.sqlite3")}
        return Backend(kind, factory, kwargs, ("--patch", str(SQLITE)), SQLITE)
    assert request is not None, "PostgreSQL needs the test's `postgres` fixture"
    target: PostgresTarget = request.getfixturevalue("postgres")
    name = f"pg-{target.schema}.yml"
    overlay = dsh.write(name, PG_OVERLAY.format(dsn=json.dumps(target.dsn), schema=target.schema))
    factory = "plugins.session_persistence_postgres:PostgresBackend"
    kwargs = {"dsn": target.dsn, "schema": target.schema}
    return Backend(kind, factory, kwargs, ("--patch", str(overlay)), overlay)


def write_jsonl_log(dsh: Sandbox, session_id: str, batches: list[list[bytes]]) -> Path:
    """Write a zstd JSONL log by hand: the header frame, then one frame per batch of lines."""
    meta = {"version": 0, "id": session_id, "createdAt": T0, "cwd": str(dsh.root)}
    path = Path(JsonlBackend(dsh.home / "sessions").locate(meta).path)
    path.parent.mkdir(mode=0o700, parents=True)
    data = frames.compress_frame(header_line(meta))
    for batch in batches:
        data += frames.compress_frame(b"".join(line + b"\n" for line in batch))
    path.write_bytes(data)
    path.chmod(0o600)
    return path
