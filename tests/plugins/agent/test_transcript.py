"""The request transcript: the surface's messages, read from the log only where it grew."""

from __future__ import annotations

from typing import Any

import pytest

import plugins.agent.request as request_module
from plugins.agent.request import Transcript
from plugins.session import Session


def _user(text: str) -> dict[str, Any]:
    return {
        "id": f"m-{text}",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": text}],
    }


def test_transcript_reads_only_new_surface_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[int] = []
    real = request_module.message_of

    def counting(event: Any) -> dict[str, Any]:
        read.append(event["seq"])
        return real(event)

    monkeypatch.setattr(request_module, "message_of", counting)
    session = Session({"version": 0, "id": "s", "createdAt": 0})
    transcript = Transcript()
    for text in ("a", "b"):
        session.append("user/message", _user(text), surface_op="append")
    assert transcript.messages(session) == session.messages()
    assert read == [0, 1]
    session.append("turn/start", {"turn": 1})
    session.append("user/message", _user("c"), surface_op="append")
    read.clear()
    messages = transcript.messages(session)
    assert messages == session.messages()
    assert read == [3]  # only the node appended since
    assert all(a is b for a, b in zip(messages, session.messages(), strict=True))
    messages.clear()  # the caller's list is its own
    assert transcript.messages(session) == session.messages()


def test_transcript_starts_over_after_a_replace() -> None:
    session = Session({"version": 0, "id": "s", "createdAt": 0})
    transcript = Transcript()
    for text in ("a", "b", "c"):
        session.append("user/message", _user(text), surface_op="append")
    assert len(transcript.messages(session)) == 3
    session.append(
        "user/message",
        _user("summary"),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    messages = transcript.messages(session)
    assert messages == session.messages()
    assert [m["id"] for m in messages] == ["m-summary", "m-c"]
