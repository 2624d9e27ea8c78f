"""Parent side of the hard-crash tests: spawn the child, await its marker, SIGKILL it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plugins.agent
import plugins.llm
import plugins.llm_replay
import plugins.session
import plugins.tools
from framework import Context

CHILD = Path(__file__).with_name("crash_child.py")
SESSION_ID = "semantic-checkpoint-crash"
MARKERS = {
    "request": "request-dispatched",
    "midstream": "stream-started",
    "tool": "tool-side-effect",
    "parallel": "second-tool-running",
    "write": "persistence-write-torn",
    "queued": "prompt-queued",
}


@dataclass(frozen=True)
class Backend:
    """Which persistence plugin the child and the parent mount, and its config."""

    name: str
    config: dict[str, Any]

    def plugin(self) -> Any:
        if self.name == "sqlite":
            import plugins.session_persistence_sqlite as sqlite

            return sqlite
        if self.name == "postgres":
            import plugins.session_persistence_postgres as postgres

            return postgres
        import plugins.session_persistence_jsonl as jsonl

        return jsonl


def jsonl(root: Path) -> Backend:
    return Backend("jsonl", {"root": str(root), "compression": "none"})


def crash(root: Path, mode: str, *, backend: Backend | None = None, no_policy: bool = False) -> str:
    """Run the child until MODE's marker, SIGKILL it, and return the marker it reached."""
    marker = root / "marker"
    marker.unlink(missing_ok=True)
    args = [sys.executable, str(CHILD), str(root), str(marker), mode]
    if no_policy:
        args.append("--no-policy")
    if backend is not None and backend.name != "jsonl":
        args += ["--backend", backend.name, "--backend-config", json.dumps(backend.config)]
    child = subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ}
    )
    expected = MARKERS[mode]
    deadline = time.monotonic() + 30
    try:
        while True:
            content = marker.read_text() if marker.exists() else ""
            if content == expected:
                break
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                _, stderr = child.communicate()
                raise AssertionError(
                    f"child did not reach {expected!r} (marker {content!r}, "
                    f"exit {child.returncode}):\n{stderr.decode(errors='replace')}"
                )
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        _, stderr = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, stderr.decode(errors="replace")
    return marker.read_text()


@asynccontextmanager
async def reopened(backend: Backend, responses: Sequence[Any] = ()) -> AsyncIterator[Context]:
    """A fresh process-like context over the same storage, with a replay model and an agent."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.llm)
        await ctx.plugin(plugins.tools)
        await ctx.plugin(backend.plugin(), backend.config)
        await ctx.plugin(plugins.llm_replay, {"provider": "crash", "responses": list(responses)})
        await ctx.plugin(plugins.agent, {"provider": "crash", "model": "crash"})
        yield ctx


def types(events: Sequence[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def assert_contiguous(events: Sequence[dict[str, Any]]) -> None:
    assert [event["seq"] for event in events] == list(range(len(events)))


def results_by_call(events: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event["type"] == "tool/result":
            found.setdefault(event["data"]["message"]["source"]["callId"], []).append(event)
    return found


def result_text(event: dict[str, Any]) -> str:
    (block,) = event["data"]["message"]["content"]
    return "".join(part["text"] for part in block["content"])


REQUEST_PREFIX = [
    "agent/inbox/spliced",
    "turn/start",
    "agent/inbox/spliced",
    "step/start",
    "user/message",
    "request/header",
    "request/context",
]

UNKNOWN = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
NOT_STARTED = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}

TOOL_MODE = [
    *REQUEST_PREFIX,
    "assistant/chunk",
    "assistant/chunk",
    "assistant/chunk",
    "assistant/message",
    "tool/call",
    "tool/result",
    "step/end",
    "turn/end",
]


def assert_tool_mode_repair(events: Sequence[dict[str, Any]]) -> None:
    """Case 13, port-strict: the durable call at seq 11 gets the unknown-outcome result at 12."""
    assert types(events) == TOOL_MODE
    assert_contiguous(events)
    assert events[11]["data"]["callId"] == "crash-call"
    (result,) = results_by_call(events)["crash-call"]
    assert result["seq"] == 12
    assert result["data"]["error"] == UNKNOWN
    assert result["sourceEventSeqs"] == [11]
    assert result["data"]["message"]["id"] == "interrupted-tool-result-crash-call-12"
    assert "Do not retry blindly." in result_text(result)
    assert events[-1]["data"]["reason"] == {"kind": "interrupted"}


async def assert_resumed_turn_runs(ctx: Any, stored: int) -> None:
    """A new turn on the repaired session completes and keeps the log contiguous."""
    handle = await ctx.agents.resume(SESSION_ID)
    handle.agent.followup("continue")
    await handle.agent.when_idle()
    events = handle.agent.session.events
    await handle.dispose()
    assert_contiguous(events)
    assert len(events) > stored
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "completed"}
