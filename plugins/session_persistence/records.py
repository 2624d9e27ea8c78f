"""What a stored record sequence means: its committed prefix, a torn tail, or corruption.

The one rule every backend reads its log with (docs/persistence.md). Records are fed in storage
order, each as the events it decodes to (`add`), as a checked packed row (`add_row`: its
members are chunk deltas, so only where they start is checked) or as a record that does not
decode (`bad`); the events must number 0, 1, 2, ... without a gap.

- Appended storage (`can_tear=True`, the JSONL files): a crash can leave the last write cut
  short or garbled, even as a newline-ended line of garbage. The first bad record ends the
  committed prefix and, with everything after it, is a torn tail, unless that record or a later
  one holds a `turn/end`: a turn that closed after the damage proves the damage was committed,
  so it is corruption.
- Transactional storage (`can_tear=False`, SQLite and PostgreSQL): a transaction commits whole
  or not at all, so any bad record, and a stored row count that disagrees with the rows, is
  corruption naming the seq; never a shorter log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from plugins.session.jsonutil import dumps

from .errors import SessionPersistenceCorruptionError

JsonObject = dict[str, Any]

#: Builds the message of a seq gap: `(expected, got)` -> text (`got` is the JSON of the seq).
GapText = Callable[[int, str], str]


def ends_turn(events: Sequence[JsonObject]) -> bool:
    """Whether any of `events` is a `turn/end` (the proof that what precedes it committed)."""
    return any(event.get("type") == "turn/end" for event in events)


class RecordSequence:
    """Feeds records in order; keeps the committed events and decides torn or corrupt."""

    __slots__ = ("_gap", "_issue", "_keep", "can_tear", "count", "events")

    def __init__(self, *, can_tear: bool, gap: GapText, keep: bool = True) -> None:
        """`keep=False`: only count the committed events (the caller keeps what `add` and
        `add_row` accept in its own form); `events` stays empty."""
        self.can_tear = can_tear
        self.events: list[JsonObject] = []
        #: How many events the committed prefix holds.
        self.count = 0
        self._keep = keep
        self._gap = gap
        self._issue: SessionPersistenceCorruptionError | None = None

    @property
    def torn(self) -> bool:
        """Whether a bad record was met (everything from it on is the torn tail)."""
        return self._issue is not None

    def add(self, decoded: Sequence[JsonObject]) -> bool:
        """One record, as the events it decodes to. True iff it joined the committed prefix;
        raises on corruption."""
        if self._issue is not None:
            if ends_turn(decoded):
                raise self._issue
            return False
        for offset, event in enumerate(decoded):
            seq = event.get("seq")
            expected = self.count + offset
            if type(seq) is not int or seq != expected:
                got = dumps(seq) if "seq" in event else "undefined"
                self._break(self._gap(expected, got), decoded)
                return False
        self.count += len(decoded)
        if self._keep:
            self.events.extend(decoded)
        return True

    def add_row(self, seq0: int, count: int) -> bool:
        """One packed row that passed `check_row`: `count` members from seq `seq0` (never a
        `turn/end`). Same answer and the same corruption as `add` of its members."""
        if self._issue is not None:
            return False
        if seq0 != self.count:
            self._break(self._gap(self.count, dumps(seq0)), ())
            return False
        self.count += count
        return True

    def bad(self, message: str) -> None:
        """One record that does not decode; `message` is the corruption naming it."""
        if self._issue is None:
            self._break(message, ())

    def finish(self, next_seq: int | None, text: Callable[[int], str]) -> None:
        """Transactional storage: the row count recorded beside the rows (`next_seq`) must be
        where the rows end; `text(next_seq)` names the disagreement."""
        if next_seq is not None and self._issue is None and next_seq != self.count:
            raise SessionPersistenceCorruptionError(text(next_seq))

    def _break(self, message: str, decoded: Sequence[JsonObject]) -> None:
        issue = SessionPersistenceCorruptionError(message)
        if not self.can_tear or ends_turn(decoded):
            raise issue
        self._issue = issue
