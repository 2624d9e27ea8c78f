"""The JSONL text of a durable batch, and the ahead-of-time part of it for live sessions.

`batch_text` is the one encoding rule: one line per record, runs of packable deltas as packed
rows (`packing.pack_records`) when `pack`. `Ahead` keeps what `admit` prepared for each event
of one live session (its line; for a packable delta its run key and the JSON of its text), so a
flush only packs and joins; the bytes are the same whether an event was prepared or not
(docs/performance.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from plugins.session.jsonutil import dumps
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.packing import Member, member_of, pack_records

__all__ = ["Ahead", "batch_text"]

#: What `admit` prepared for one event: the event, then its line (an event stored as it is) or
#: its packing member and the JSON of its text (a packable delta, whose own line is made only
#: if no run takes it).
_Prepared = tuple[JsonObject, str | None, Member | None, str | None]
#: `Ahead.take`'s answer: line, member, text JSON.
_Taken = tuple[str | None, Member | None, str | None]
_NOTHING: Final = (None, None, None)


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
            if member is None:
                self._ready.append((event, dumps(event), None, None))
            else:
                self._ready.append((event, None, member, dumps(member[1])))
        except Exception:
            return

    def take(self, event: JsonObject) -> _Taken:
        """What was prepared for `event` (dropping anything older), else nothing."""
        ready = self._ready
        seq = event["seq"]
        while ready and ready[0][0]["seq"] < seq:
            ready.popleft()
        if ready and ready[0][0] is event:
            _, line, member, text = ready.popleft()
            return line, member, text
        return _NOTHING


def batch_text(events: Sequence[JsonObject], *, pack: bool, ahead: Ahead | None = None) -> str:
    """The lines of one durable batch, each ended by a newline; `ahead` supplies what was
    prepared (an event without it is encoded here)."""
    lines: list[str | None] = []
    members: list[Member | None] = []
    texts: list[str | None] = []
    for event in events:
        line, member, text = _NOTHING if ahead is None else ahead.take(event)
        if line is None and member is None and pack:
            member = member_of(event)
        lines.append(line)
        members.append(member)
        texts.append(text)
    out: list[str] = []
    if not pack:
        out.extend(dumps(events[k]) if line is None else line for k, line in enumerate(lines))
    for record in pack_records(events, members) if pack else ():
        if isinstance(record, int):
            line = lines[record]
            out.append(dumps(events[record]) if line is None else line)
        else:
            start, row = record
            data = row["data"]
            prepared = texts[start : start + len(data["texts" if "texts" in data else "args"])]
            out.append(dumps(row) if None in prepared else _row_line(row, prepared))
    out.append("")
    return "\n".join(out)


def _row_line(row: JsonObject, texts: list[str | None]) -> str:
    """`dumps(row)` of a packed row whose member texts are already JSON (`texts`): the row's
    other values are safe integers and strings, in `packing`'s key order."""
    data = row["data"]
    dt = ",".join(map(str, data["dt"]))
    head = (
        f'{{"type":"{row["type"]}","seq0":{row["seq0"]},"time0":{row["time0"]},"data":'
        f'{{"turn":{data["turn"]},"step":{data["step"]},"index":{data["index"]},"dt":[{dt}]'
    )
    joined = ",".join(texts)  # type: ignore[arg-type]
    if "texts" in data:
        return f'{head},"texts":[{joined}]}}}}'
    name = f',"name":{dumps(data["name"])}' if "name" in data else ""
    return f'{head},"id":{dumps(data["id"])}{name},"args":[{joined}]}}}}'
