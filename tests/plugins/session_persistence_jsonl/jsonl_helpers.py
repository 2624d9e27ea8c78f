"""Event builders and file helpers shared by the JSONL backend tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plugins.session_persistence.testing import FIXTURE_NAMES, FIXTURES  # noqa: F401
from plugins.session_persistence_jsonl import JsonlBackend

JsonObject = dict[str, Any]

MODES = ("none", "zstd")


def meta(session_id: str = "s1", cwd: str | None = "/home/u/proj", **extra: Any) -> JsonObject:
    """A session header in meta form."""
    out: JsonObject = {"version": 0, "id": session_id, "createdAt": 1000}
    if cwd is not None:
        out["cwd"] = cwd
    out.update(extra)
    return out


def chunk(seq: int, text: str, *, time: int | None = None, kind: str = "text-delta") -> JsonObject:
    """A streaming text (or reasoning) delta of turn 1, step 1, block 0."""
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 100 + seq if time is None else time,
        "data": {"turn": 1, "step": 1, "chunk": {"type": kind, "index": 0, "text": text}},
    }


def event(seq: int, kind: str, data: JsonObject) -> JsonObject:
    """A plain event at time `100 + seq`."""
    return {"type": kind, "seq": seq, "time": 100 + seq, "data": data}


def turn(start: int, turn_no: int = 1, deltas: int = 4) -> list[JsonObject]:
    """A complete turn from seq `start`: turn/start, step/start, deltas, step/end, turn/end."""
    out = [event(start, "turn/start", {"turn": turn_no})]
    out.append(event(start + 1, "step/start", {"turn": turn_no, "step": 1}))
    for k in range(deltas):
        seq = start + 2 + k
        delta = chunk(seq, f"w{k} ")
        delta["data"]["turn"] = turn_no
        out.append(delta)
    seq = start + 2 + deltas
    out.append(event(seq, "step/end", {"turn": turn_no, "step": 1}))
    out.append(event(seq + 1, "turn/end", {"turn": turn_no, "reason": {"kind": "completed"}}))
    return out


def open_turn(start: int, turn_no: int = 1, deltas: int = 4) -> list[JsonObject]:
    """A turn cut off inside its step (no step/end, no turn/end)."""
    return turn(start, turn_no, deltas)[:-2]


def backend(root: Path, mode: str, **kwargs: Any) -> JsonlBackend:
    """A backend over `root/sessions` in compression `mode`."""
    return JsonlBackend(root / "sessions", compression=mode, **kwargs)  # type: ignore[arg-type]


async def write(b: JsonlBackend, m: JsonObject, batches: list[list[JsonObject]]) -> Path:
    """Create `m`'s log with the first batch, append the others; return the log path."""
    for i, batch in enumerate(batches):
        await b.append_batch(m, batch, is_materialized=i > 0)
    return Path(b.locate(m).path)
