"""The JSONL text of a durable batch, and the ahead-of-time part of it for live sessions.

`batch_text` is the one encoding rule: one line per record, runs of packable deltas as packed
rows (`packing.pack_records`) when `pack`. `Ahead` keeps what `admit` prepared for each event
of one live session (its line, or for a packable delta its run key), so a flush only packs and
joins; the bytes are the same whether an event was prepared or not (docs/performance.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from plugins.session.jsonutil import dumps
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.packing import Member, member_of, pack_records

__all__ = ["Ahead", "batch_text"]

#: What `admit` prepared for one event: the event, its line (None for a packable delta, whose
#: line is made only if no run takes it) and its packing member.
_Prepared = tuple[JsonObject, str | None, Member | None]
_NOTHING: Final = (None, None)


class Ahead:
    """Prepared lines of one live session, made on the loop thread (`admit`) and taken by the
    write that stores them (`take`), possibly on the I/O thread: `deque` appends and pops are
    atomic, and the coordinator never overlaps two writes of one session."""

    __slots__ = ("_pack", "_ready")

    def __init__(self, *, pack: bool) -> None:
        self._pack = pack
        self._ready: deque[_Prepared] = deque()

    def admit(self, event: JsonObject) -> None:
        """Prepare `event` (admitted in seq order); one that does not encode is left to the
        write, which raises as it always did."""
        try:
            member = member_of(event) if self._pack else None
            self._ready.append((event, None if member is not None else dumps(event), member))
        except Exception:
            return

    def take(self, event: JsonObject) -> tuple[str | None, Member | None]:
        """What was prepared for `event` (dropping anything older), else `(None, None)`."""
        ready = self._ready
        seq = event["seq"]
        while ready and ready[0][0]["seq"] < seq:
            ready.popleft()
        if ready and ready[0][0] is event:
            _, line, member = ready.popleft()
            return line, member
        return _NOTHING


def batch_text(events: Sequence[JsonObject], *, pack: bool, ahead: Ahead | None = None) -> str:
    """The lines of one durable batch, each ended by a newline; `ahead` supplies what was
    prepared (an event without it is encoded here)."""
    lines: list[str | None] = []
    members: list[Member | None] = []
    for event in events:
        line, member = _NOTHING if ahead is None else ahead.take(event)
        if line is None and member is None and pack:
            member = member_of(event)
        lines.append(line)
        members.append(member)
    records = pack_records(events, members) if pack else range(len(events))
    out: list[str] = []
    for record in records:
        if type(record) is int:
            line = lines[record]
            out.append(dumps(events[record]) if line is None else line)
        else:
            out.append(dumps(record))
    out.append("")
    return "\n".join(out)
