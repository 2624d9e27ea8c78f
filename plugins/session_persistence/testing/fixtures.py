"""The original harness's session logs every backend must read, shipped in `original_logs/`."""

from __future__ import annotations

import os
from pathlib import Path

from plugins.session.jsonutil import loads

from ..backend import JsonObject
from ..packing import decode_record

#: The original harness's logs (`$DSH_FIXTURE_LOGS`, else the copies shipped beside this file).
FIXTURES = Path(
    os.environ.get("DSH_FIXTURE_LOGS", Path(__file__).resolve().parent / "original_logs")
)
#: The original harness's logs every backend must read (a missing one fails, never skips).
FIXTURE_NAMES = (
    "advanced-toolchain.jsonl",
    "fs-policy-reject.jsonl",
    "goal-multi-turn-actions.jsonl",
    "tool-outcome-unknown-resumed.jsonl",
)


def read_fixture(path: Path) -> tuple[JsonObject, list[JsonObject]]:
    """An original raw log: its header (as meta, without the storage tag) and its events,
    packed chunk rows decoded."""
    lines = path.read_bytes().split(b"\n")
    header = loads(lines[0])
    del header["type"]
    events = [item for line in lines[1:] if line for item in decode_record(loads(line))]
    return header, events
