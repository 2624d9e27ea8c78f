"""The JSONL text of a durable batch, and the ahead-of-time part of it for live sessions.

`batch_text` is the one encoding rule: one line per record, runs of packable deltas as packed
rows (`packing.pack_records`) when `pack`. `Ahead` keeps what `admit` prepared for each event
of one live session (its line; for a packable delta its run key, the JSON of its text and where
it stands in its run, and its own line once its run is known to be too short to pack), so a
flush of events all prepared only cuts the runs where the batch does and joins; the bytes are
the same whether an event was prepared or not (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from plugins.session.jsonutil import dumps
from plugins.session_persistence import ahead
from plugins.session_persistence.ahead import prepared
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.packing import MIN_RUN, Member, member_line, pack_records, row_line

__all__ = ["Ahead", "batch_text"]


class Ahead(ahead.Ahead[str]):
    """Lines of one live session prepared as its events are admitted (`ahead.Ahead`)."""

    __slots__ = ()

    def __init__(self, *, pack: bool) -> None:
        super().__init__(dumps, pack=pack, encode_member=member_line)


def batch_text(events: Sequence[JsonObject], *, pack: bool, ahead: Ahead | None = None) -> str:
    """The lines of one durable batch, each ended by a newline; `ahead` supplies what was
    prepared (an event without it is encoded here)."""
    taken = ahead.take_all(events) if ahead is not None else None
    if taken is not None:
        return _taken_text(taken)
    lines, members, texts = prepared(events, ahead, pack=pack)
    out: list[str] = []
    if not pack:
        out.extend(dumps(events[k]) if line is None else line for k, line in enumerate(lines))
    for record in pack_records(events, members) if pack else ():
        if isinstance(record, int):
            line, member, text = lines[record], members[record], texts[record]
            if line is None:
                ev = events[record]
                line = (
                    dumps(ev) if member is None or text is None else member_line(ev, member, text)
                )
            out.append(line)
        else:
            start, row = record
            data = row["data"]
            ready = texts[start : start + len(data["texts" if "texts" in data else "args"])]
            out.append(dumps(row) if None in ready else _row_line(row, ready, members[start]))
    out.append("")
    return "\n".join(out)


def _taken_text(taken: list[list[Any]]) -> str:
    """The lines of a batch whose every event was prepared, admitted one after the other
    (`Ahead.take_all`): each delta's run as admitted, cut where the batch starts and ends,
    packed when that leaves `MIN_RUN` members (`pack_records`' rule, applied at admission)."""
    if None not in map(_LINE, taken):
        # Every event has its line: no delta of an open or packable run (those have none
        # until the write packs them), so each is stored on its own line.
        return "\n".join([*map(_LINE, taken), ""])
    out: list[str] = []
    count = len(taken)
    #: Where each run ends: at the next entry that continues none (or the batch's end).
    gaps = [*map(_GAP, taken), None]
    k = 0
    while k < count:
        event, line, member, text, _ = taken[k]
        if member is None:
            out.append(line)
            k += 1
            continue
        end = gaps.index(None, k + 1)
        if end - k >= MIN_RUN:
            dt = ",".join(map(str, gaps[k + 1 : end]))
            texts = ",".join(map(_TEXT, taken[k:end]))
            out.append(row_line(member[0], event["seq"], event["time"], dt, texts))
        else:
            for ev, line, member, text, _ in taken[k:end]:
                out.append(line if line is not None else member_line(ev, member, text))
        k = end
    out.append("")
    return "\n".join(out)


_LINE = itemgetter(1)
_GAP = itemgetter(4)
_TEXT = itemgetter(3)


def _row_line(row: JsonObject, texts: list[str | None], member: Member | None) -> str:
    """`dumps(row)` of a packed row whose member texts are already JSON (`texts`)."""
    data = row["data"]
    key = member[0]  # type: ignore[index]
    dt = ",".join(map(str, data["dt"]))
    return row_line(key, row["seq0"], row["time0"], dt, ",".join(texts))  # type: ignore[arg-type]
