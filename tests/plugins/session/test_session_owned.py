"""Owned appends: the agent loop's payloads kept as built; everyone else's still copied."""

from __future__ import annotations

from typing import Any

import pytest

import plugins.session
from plugins.session import EventFormatError, Session, UnknownEventTypeError
from plugins.session.owned import append_owned, checked

HEADER = {"version": 0, "id": "s", "createdAt": 5}


def message() -> dict[str, Any]:
    return {
        "id": "m1",
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "source": {"kind": "user"},
    }


def test_an_owned_payload_is_kept_as_built_and_published() -> None:
    session = Session(HEADER, clock=lambda: 7)
    seen: list[dict[str, Any]] = []
    session.publish_to(lambda _, event: seen.append(event))
    data = {"turn": 1, "step": 1}
    event = append_owned(session, "step/start", data)
    assert event == {"type": "step/start", "seq": 0, "time": 7, "data": data}
    assert event["data"] is data
    seqs = [1]
    owned = append_owned(session, "user/message", message(), surface_op="append")
    assert owned["surfaceOp"] == "append"
    assert session.surface.nodes == [1]
    replaced = append_owned(
        session,
        "user/message",
        message(),
        surface_op={"end": 1, "start": 1, "op": "replace"},
        source_event_seqs=seqs,
    )
    assert list(replaced["surfaceOp"]) == ["op", "start", "end"]
    assert replaced["sourceEventSeqs"] is seqs
    assert seen == [event, owned, replaced]


def test_owned_appends_are_still_checked() -> None:
    session = Session(HEADER)
    with pytest.raises(UnknownEventTypeError):
        append_owned(session, "no/such-type", {})
    with pytest.raises(EventFormatError, match="must carry a surfaceOp"):
        append_owned(session, "user/message", message())
    assert session.events == []


def test_the_public_append_still_copies_a_mutable_payload() -> None:
    session = Session(HEADER)
    data = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}}
    event = session.append("assistant/chunk", data)
    data["chunk"]["text"] = "changed"
    assert event["data"] is not data
    assert event["data"]["chunk"] == {"type": "text-delta", "index": 0, "text": "a"}


def test_checked_is_the_public_appends_snapshot() -> None:
    chunk = {"type": "text-delta", "index": 0, "text": "a", "extra": [1, {"k": None}]}
    copy = checked("assistant/chunk", chunk)
    assert copy == chunk
    assert copy is not chunk
    assert copy["extra"] is not chunk["extra"]
    with pytest.raises(TypeError) as info:
        checked("assistant/chunk", {"x": (1, 2)})
    assert str(info.value) == 'session event "assistant/chunk" carries non-JSON-serializable data'
    assert "value['x'] has type tuple" in str(info.value.__cause__)


def test_the_owned_path_is_not_part_of_the_plugins_api() -> None:
    assert "append_owned" not in plugins.session.__all__
    assert not hasattr(plugins.session, "append_owned")
