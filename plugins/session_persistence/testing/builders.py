"""Event builders: small, valid logs in the on-disk envelope (a turn, an open step, a started
tool call), plus the helpers to feed them to a live Session and compare logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plugins.session import Session
from plugins.session.events import live_event
from plugins.session.jsonutil import dumps

from ..backend import JsonObject

T0 = 1_767_225_600_000
CWD = "/home/user/project"


def event(
    seq: int,
    kind: str,
    data: Any,
    *,
    surface_op: Any = None,
    source: list[int] | None = None,
    ignorable: bool = False,
) -> JsonObject:
    """An event in live key order at time `T0 + seq`."""
    return live_event(
        kind,
        seq,
        T0 + seq,
        data,
        ignorable=ignorable,
        source_event_seqs=source,
        surface_op=surface_op,
    )


def _user(seq: int, text: str) -> JsonObject:
    message = {
        "id": f"user-{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return event(seq, "user/message", message, surface_op="append")


def _assistant(seq: int, turn: int, content: list[JsonObject]) -> JsonObject:
    message = {
        "id": f"assistant-{seq}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "replay", "model": "replay-1"},
    }
    data = {"turn": turn, "step": 1, "message": message}
    return event(seq, "assistant/message", data, surface_op="append")


def open_step_turn(start: int, turn: int = 1) -> list[JsonObject]:
    """`turn/start`, `user/message`, `step/start`: a turn cut off in its open step."""
    return [
        event(start, "turn/start", {"turn": turn}),
        _user(start + 1, f"question {turn}"),
        event(start + 2, "step/start", {"turn": turn, "step": 1}),
    ]


def complete_turn(start: int, turn: int = 1) -> list[JsonObject]:
    """A balanced turn of six events from seq `start`."""
    answer = _assistant(start + 3, turn, [{"type": "text", "text": f"answer {turn}"}])
    return [
        *open_step_turn(start, turn),
        answer,
        event(start + 4, "step/end", {"turn": turn, "step": 1}),
        event(start + 5, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def open_tool_turn(start: int, turn: int = 1, *, started: bool) -> list[JsonObject]:
    """A turn cut off after the model asked for tool call `call-<turn>` (logged as started, a
    `tool/call`, when `started`)."""
    call = {"type": "tool-call", "id": f"call-{turn}", "name": "probe", "arguments": "{}"}
    events = [*open_step_turn(start, turn), _assistant(start + 3, turn, [call])]
    if started:
        data = {"turn": turn, "step": 1, "callId": f"call-{turn}", "name": "probe"}
        events.append(event(start + 4, "tool/call", {**data, "arguments": "{}"}))
    return events


def replay(session: Session, events: Sequence[JsonObject]) -> None:
    """Append builder events to a live session (its own seqs and times)."""
    for item in events:
        session.append(
            item["type"],
            item["data"],
            surface_op=item.get("surfaceOp"),
            source_event_seqs=item.get("sourceEventSeqs"),
        )


def texts(events: Sequence[JsonObject]) -> list[str]:
    """Events as their JSON text: equal lists mean byte-equal logs."""
    return [dumps(item) for item in events]


def meta(session_id: str, created_at: int = 1000, **extra: Any) -> JsonObject:
    """Session metadata at the suite's cwd."""
    return {"id": session_id, "createdAt": created_at, "cwd": CWD, **extra}
