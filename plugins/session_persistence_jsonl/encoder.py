"""The JSONL text of a durable batch, and the ahead-of-time part of it for live sessions.

`batch_text` is the one encoding rule: one line per record, runs of packable deltas as packed
rows (`packing.pack_records`) when `pack`. `Ahead` keeps what `admit` prepared for each event
of one live session (its line; for a packable delta its run key and the JSON of its text, and
its own line once its run is known to be too short to pack), so a flush only packs and joins;
the bytes are the same whether an event was prepared or not (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from plugins.session.jsonutil import dumps
from plugins.session_persistence import ahead
from plugins.session_persistence.ahead import prepared
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.packing import member_line, pack_records

__all__ = ["Ahead", "batch_text"]


class Ahead(ahead.Ahead[str]):
    """Lines of one live session prepared as its events are admitted (`ahead.Ahead`)."""

    __slots__ = ()

    def __init__(self, *, pack: bool) -> None:
        super().__init__(dumps, pack=pack, encode_member=member_line)


def batch_text(events: Sequence[JsonObject], *, pack: bool, ahead: Ahead | None = None) -> str:
    """The lines of one durable batch, each ended by a newline; `ahead` supplies what was
    prepared (an event without it is encoded here)."""
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
            out.append(dumps(row) if None in ready else _row_line(row, ready))
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
