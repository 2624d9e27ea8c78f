"""derive_messages: the model-visible transcript from surface events."""

from __future__ import annotations

from typing import Any

from plugins.session.events import SURFACE_TYPES
from plugins.session.messages import derive_messages, message_of


def _msg(seq: int, role: str = "user", text: str = "t") -> dict[str, Any]:
    return {
        "id": f"m{seq}",
        "role": role,
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def test_fixture_transcripts_follow_surface_events(fixture_log: Any) -> None:
    messages = derive_messages(fixture_log.events)
    expected = [message_of(e) for e in fixture_log.events if e["type"] in SURFACE_TYPES]
    assert messages == expected
    assert messages
    assert {m["role"] for m in messages} <= {"user", "assistant"}


def test_outcome_unknown_fixture_transcript(outcome_unknown_log: Any) -> None:
    messages = derive_messages(outcome_unknown_log.events)
    assert [m["id"] for m in messages] == [
        "00000000-0000-0000-0000-000000001001",
        "00000000-0000-0000-0000-000000001002",
        "interrupted-tool-result-unknown-outcome-call-5",
        "00000000-0000-0000-0000-000000001003",
        "00000000-0000-0000-0000-000000001004",
    ]


def test_messages_by_event_type() -> None:
    events = [
        {"type": "user/message", "seq": 0, "time": 0, "data": _msg(0), "surfaceOp": "append"},
        {"type": "turn/start", "seq": 1, "time": 0, "data": {"turn": 1}},
        {
            "type": "assistant/message",
            "seq": 2,
            "time": 0,
            "data": {"turn": 1, "step": 1, "message": _msg(2, "assistant")},
            "surfaceOp": "append",
        },
        {
            "type": "tool/result",
            "seq": 3,
            "time": 0,
            "data": {"turn": 1, "step": 1, "message": _msg(3)},
            "surfaceOp": "append",
        },
    ]
    assert [m["id"] for m in derive_messages(events)] == ["m0", "m2", "m3"]


def test_replace_swaps_the_range() -> None:
    events: list[dict[str, Any]] = [
        {"type": "user/message", "seq": s, "time": 0, "data": _msg(s), "surfaceOp": "append"}
        for s in range(4)
    ]
    events.append(
        {
            "type": "user/message",
            "seq": 4,
            "time": 0,
            "data": _msg(4, text="summary"),
            "sourceEventSeqs": [0, 1, 2],
            "surfaceOp": {"op": "replace", "start": 0, "end": 2},
        }
    )
    events.append(
        {
            "type": "tool/result",
            "seq": 5,
            "time": 0,
            "data": {"message": _msg(3, text="rewritten")},
            "sourceEventSeqs": [3],
            "surfaceOp": {"op": "replace", "start": 3, "end": 3},
        }
    )
    messages = derive_messages(events)
    assert [m["content"][0]["text"] for m in messages] == ["summary", "rewritten"]
    assert derive_messages([]) == []
