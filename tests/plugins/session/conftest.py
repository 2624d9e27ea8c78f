"""Fixture logs of the original harness, decoded into plain events for the session tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from plugins.session import jsonutil
from plugins.session_persistence.testing import FIXTURE_NAMES as PERSISTED_FIXTURE_NAMES
from plugins.session_persistence.testing import FIXTURES

#: `$DSH_FIXTURE_LOGS`, else the copies shipped in `plugins/session_persistence/testing/`.
ORIGINAL_LOGS = FIXTURES


@dataclass
class FixtureLog:
    name: str
    lines: list[str]
    header: dict[str, Any]
    events: list[dict[str, Any]]


def _unpack(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Expand a packed `*-chunks` storage row into its `assistant/chunk` events (test-only)."""
    tag = record["type"]
    if tag not in ("text-chunks", "reasoning-chunks", "tool-call-chunks"):
        return [record]
    data = record["data"]
    out = []
    time = record["time0"]
    for k in range(len(data["dt"]) + 1):
        if k:
            time += data["dt"][k - 1]
        chunk: dict[str, Any]
        if tag == "tool-call-chunks":
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = data["args"][k]
        else:
            kind = "text-delta" if tag == "text-chunks" else "reasoning-delta"
            chunk = {"type": kind, "index": data["index"], "text": data["texts"][k]}
        out.append(
            {
                "type": "assistant/chunk",
                "seq": record["seq0"] + k,
                "time": time,
                "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
            }
        )
    return out


def load_fixture(name: str) -> FixtureLog:
    lines = (ORIGINAL_LOGS / name).read_text(encoding="utf-8").splitlines()
    header = jsonutil.loads(lines[0])
    del header["type"]
    events = [e for line in lines[1:] for e in _unpack(jsonutil.loads(line))]
    return FixtureLog(name, lines, header, events)


FIXTURE_NAMES = list(PERSISTED_FIXTURE_NAMES)


@pytest.fixture(params=FIXTURE_NAMES)
def fixture_log(request: pytest.FixtureRequest) -> FixtureLog:
    """Each of the original's fixture logs in turn."""
    return load_fixture(str(request.param))


@pytest.fixture
def outcome_unknown_log() -> FixtureLog:
    """`tool-outcome-unknown-resumed.jsonl`: a repaired crash then a resumed turn."""
    return load_fixture("tool-outcome-unknown-resumed.jsonl")
