"""The agent inbox: `next-turn` and `next-step` queues, event-sourced as `agent/inbox/spliced`.

Every mutation appends its splice to the session **before** it changes the lists, so the log
alone rebuilds the inbox, also after a crash (docs/agent-loop.md). No-op mutations append nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from plugins.session.eventlog import Event, plain_events
from plugins.session.jsonutil import snapshot

from .messages import user_message

Target = Literal["next-turn", "next-step"]
Message = dict[str, Any]
SPLICED = "agent/inbox/spliced"
TARGETS: tuple[Target, Target] = ("next-turn", "next-step")


def replay_start(header: Mapping[str, Any], first_live_seq: int, *, stored: bool) -> int:
    """The seq the inbox's splices start at: the first after the seed (a seed's splices are its
    source's inbox, not this session's). A live session knows its seed (`first_live_seq`); for a
    stored one only the header tells (`seedLength`, a fork's), else the log has none: seq 0."""
    if not stored:
        return first_live_seq
    seed_length = header.get("seedLength")
    return seed_length if isinstance(seed_length, int) else 0


class Inbox:
    """Pending user messages of one agent.

    `append` is the session's append (`append(type, data)`); `notify(name, target, messages)`
    publishes the live `agent/inbox/inserted|claimed|discarded` events.
    """

    def __init__(
        self,
        append: Callable[[str, dict[str, Any]], object],
        notify: Callable[[str, Target, list[Message]], None],
    ) -> None:
        self._append = append
        self._notify = notify
        self._lists: dict[str, list[Message]] = {"next-turn": [], "next-step": []}

    @property
    def next_turn(self) -> tuple[Message, ...]:
        """Prompts waiting for a turn, oldest first."""
        return tuple(self._lists["next-turn"])

    @property
    def next_step(self) -> tuple[Message, ...]:
        """Messages waiting for the next step of the current (or next) turn."""
        return tuple(self._lists["next-step"])

    @property
    def pending(self) -> bool:
        """Whether anything waits in either list."""
        return bool(self._lists["next-turn"] or self._lists["next-step"])

    def replay(self, events: Sequence[Event]) -> None:
        """Rebuild both lists from `agent/inbox/spliced` events (no appends, no notifications):
        what was queued and no claim or clear took is pending again, in order. Packed chunk
        rows are skipped unread (docs/event-log.md)."""
        for _, event in plain_events(events):
            if event["type"] == SPLICED:
                data = event["data"]
                items = self._lists[data["target"]]
                start = data["start"]
                items[start : start + data.get("removedCount", 0)] = snapshot(data["inserted"])

    def insert(self, target: Target, message: str | Mapping[str, Any]) -> Message:
        """Queue one message at the end of `target`; `str` becomes a user message."""
        item = user_message(message)
        if any(m["id"] == item["id"] for lst in self._lists.values() for m in lst):
            raise ValueError(f'message "{item["id"]}" is already pending')
        items = self._lists[target]
        self._append(SPLICED, {"target": target, "start": len(items), "inserted": [item]})
        items.append(item)
        self._notify("agent/inbox/inserted", target, [item])
        return item

    def claim(self, target: Target) -> list[Message]:
        """Take what a step consumes: all of `next-step`, then (for `next-turn`) one prompt."""
        claimed = self._take("next-step", len(self._lists["next-step"]))
        if target == "next-turn":
            claimed += self._take("next-turn", min(1, len(self._lists["next-turn"])))
        return claimed

    def clear(self) -> None:
        """Discard everything pending (`outcome: "canceled"`), `next-step` first."""
        for target in ("next-step", "next-turn"):
            items = self._lists[target]
            if not items:
                continue
            removed = list(items)
            self._append(
                SPLICED,
                {
                    "target": target,
                    "start": 0,
                    "removedCount": len(items),
                    "inserted": [],
                    "outcome": "canceled",
                },
            )
            items.clear()
            self._notify("agent/inbox/discarded", target, removed)

    def _take(self, target: Target, count: int) -> list[Message]:
        if count == 0:
            return []
        items = self._lists[target]
        self._append(SPLICED, {"target": target, "start": 0, "removedCount": count, "inserted": []})
        taken = items[:count]
        del items[:count]
        self._notify("agent/inbox/claimed", target, taken)
        return taken
