"""The inbox's splice payloads, claim order, clearing, replay and id checks."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.agent.inbox import Inbox

CANCELED = "canceled"


class Log:
    """Collects appended splices and live notifications."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.notes: list[tuple[str, str, list[str]]] = []

    def append(self, event_type: str, data: dict[str, Any]) -> None:
        self.events.append({"type": event_type, "data": data})

    def notify(self, name: str, target: str, messages: list[dict[str, Any]]) -> None:
        self.notes.append((name, target, [m["id"] for m in messages]))


def msg(mid: str, text: str = "hi") -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": mid,
    }


def test_insert_appends_splice_before_mutation_with_exact_payload() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    seen: list[tuple[int, int]] = []

    def append(event_type: str, data: dict[str, Any]) -> None:
        # The lists are not yet mutated when the splice is written.
        seen.append((len(inbox.next_turn), len(inbox.next_step)))
        log.append(event_type, data)

    inbox._append = append
    inbox.insert("next-turn", msg("a"))
    inbox.insert("next-turn", msg("b"))
    inbox.insert("next-step", msg("c"))
    assert seen == [(0, 0), (1, 0), (2, 0)]
    assert [e["data"] for e in log.events] == [
        {"target": "next-turn", "start": 0, "inserted": [msg("a")]},
        {"target": "next-turn", "start": 1, "inserted": [msg("b")]},
        {"target": "next-step", "start": 0, "inserted": [msg("c")]},
    ]
    assert all(e["type"] == "agent/inbox/spliced" for e in log.events)
    assert list(log.events[0]["data"]) == ["target", "start", "inserted"]
    assert log.notes[0] == ("agent/inbox/inserted", "next-turn", ["a"])


def test_text_becomes_a_user_message_in_the_original_key_order() -> None:
    log = Log()
    item = Inbox(log.append, log.notify).insert("next-turn", "hello")
    assert list(item) == ["content", "source", "role", "id"]
    assert item["content"] == [{"type": "text", "text": "hello"}]
    assert item["source"] == {"kind": "user"}
    assert item["role"] == "user"
    assert len(item["id"]) == 36


def test_claim_takes_next_step_then_one_prompt() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    inbox.insert("next-turn", msg("p1"))
    inbox.insert("next-turn", msg("p2"))
    inbox.insert("next-step", msg("s1"))
    inbox.insert("next-step", msg("s2"))
    log.events.clear()
    claimed = inbox.claim("next-turn")
    assert [m["id"] for m in claimed] == ["s1", "s2", "p1"]
    assert [e["data"] for e in log.events] == [
        {"target": "next-step", "start": 0, "removedCount": 2, "inserted": []},
        {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []},
    ]
    assert [m["id"] for m in inbox.next_turn] == ["p2"]
    assert ("agent/inbox/claimed", "next-step", ["s1", "s2"]) in log.notes


def test_empty_claims_and_clears_append_nothing() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    assert inbox.claim("next-turn") == []
    assert inbox.claim("next-step") == []
    inbox.clear()
    assert log.events == []
    inbox.insert("next-turn", msg("p"))
    log.events.clear()
    assert [m["id"] for m in inbox.claim("next-step")] == []
    assert log.events == []


def test_clear_discards_next_step_then_next_turn_as_canceled() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    inbox.insert("next-turn", msg("p"))
    inbox.insert("next-step", msg("s1"))
    inbox.insert("next-step", msg("s2"))
    log.events.clear()
    inbox.clear()
    assert [e["data"] for e in log.events] == [
        {"target": "next-step", "start": 0, "removedCount": 2, "inserted": [], "outcome": CANCELED},
        {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": CANCELED},
    ]
    assert not inbox.pending
    assert log.notes[-1] == ("agent/inbox/discarded", "next-turn", ["p"])


def test_pending_ids_are_unique() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    inbox.insert("next-turn", msg("x"))
    with pytest.raises(ValueError, match='message "x" is already pending'):
        inbox.insert("next-step", msg("x"))
    assert len(log.events) == 1


def test_replay_rebuilds_the_lists_from_splices() -> None:
    log = Log()
    inbox = Inbox(log.append, log.notify)
    inbox.insert("next-turn", msg("p1"))
    inbox.insert("next-turn", msg("p2"))
    inbox.insert("next-step", msg("s"))
    inbox.claim("next-turn")
    inbox.insert("next-turn", msg("p3"))
    rebuilt = Inbox(Log().append, Log().notify)
    rebuilt.replay(log.events)
    assert rebuilt.next_turn == inbox.next_turn
    assert rebuilt.next_step == inbox.next_step
    assert [m["id"] for m in rebuilt.next_turn] == ["p2", "p3"]


def test_messages_must_be_user_messages() -> None:
    inbox = Inbox(Log().append, Log().notify)
    with pytest.raises(ValueError, match='role "user"'):
        inbox.insert("next-turn", {"role": "assistant", "content": []})
    with pytest.raises(TypeError):
        inbox.insert("next-turn", 42)  # type: ignore[arg-type]
    item = inbox.insert("next-turn", {"role": "user", "content": [{"type": "text", "text": "x"}]})
    assert item["source"] == {"kind": "user"}
    assert isinstance(item["id"], str)
