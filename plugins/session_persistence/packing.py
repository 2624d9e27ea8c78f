"""Packed chunk rows: the storage record codec shared by the JSONL and SQLite backends.

A run of three or more consecutive streaming `assistant/chunk` deltas of one block is stored as
one record (docs/event-log.md)::

    {"type":"text-chunks"|"reasoning-chunks","seq0":s,"time0":t,
     "data":{"turn","step","index","dt":[...],"texts":[...]}}
    {"type":"tool-call-chunks","seq0":s,"time0":t,
     "data":{"turn","step","index","dt":[...],"id","name"?,"args":[...]}}

Member k has seq `seq0 + k` and time `time0 + dt[0] + ... + dt[k-1]`. Encoding packs only events
whose exact shape (keys and their order) the decoder reproduces, so a round trip is lossless.
Every other record is an event and decodes to itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Any, Final

from plugins.session.jsonutil import dumps

__all__ = [
    "CHUNK_TAGS",
    "MIN_RUN",
    "MalformedStorageRowError",
    "Member",
    "check_row",
    "decode_record",
    "encode_records",
    "gap_after",
    "member_data",
    "member_line",
    "member_of",
    "pack_records",
    "row_line",
    "row_members",
]

JsonObject = dict[str, Any]

#: Record types of packed rows (no slash: they can never be event types).
CHUNK_TAGS: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
#: Shortest run that is packed.
MIN_RUN: Final = 3

_MAX_SAFE: Final = 2**53 - 1
#: What a packable event contributes to a row: its run key and its payload text.
Member = tuple[tuple[Any, ...], str]
_EVENT_KEYS: Final = ("type", "seq", "time", "data")
_DATA_KEYS: Final = ("turn", "step", "chunk")
_TEXT_CHUNK_KEYS: Final = ("type", "index", "text")
_TOOL_CHUNK_KEYS: Final = ("type", "index", "id", "argumentsDelta")
_NAMED_TOOL_CHUNK_KEYS: Final = ("type", "index", "id", "name", "argumentsDelta")
_DELTA_OF_TAG: Final = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_ROW_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "id", "args"})


class MalformedStorageRowError(ValueError):
    """Raised when a packed row cannot be decoded: `malformed <tag> storage row: <why>`."""

    def __init__(self, tag: str, why: str) -> None:
        self.tag = tag
        self.why = why
        super().__init__(f"malformed {tag} storage row: {why}")


def _is_int(value: object) -> bool:
    return type(value) is int and -_MAX_SAFE <= value <= _MAX_SAFE


def member_of(event: JsonObject) -> Member | None:
    """The run key and payload text of a packable event, else None.

    The key (`(tag, turn, step, index, id, has_name, name)`) is what members of one row share.
    This runs for every event written, so the checks are inlined.
    """
    if event.get("type") != "assistant/chunk" or tuple(event) != _EVENT_KEYS:
        return None
    data = event["data"]
    if type(data) is not dict or tuple(data) != _DATA_KEYS:
        return None
    chunk = data["chunk"]
    if type(chunk) is not dict:
        return None
    seq, time, turn, step = event["seq"], event["time"], data["turn"], data["step"]
    if not (
        type(seq) is int
        and type(time) is int
        and type(turn) is int
        and type(step) is int
        and 0 <= seq <= _MAX_SAFE
        and -_MAX_SAFE <= time <= _MAX_SAFE
        and -_MAX_SAFE <= turn <= _MAX_SAFE
        and -_MAX_SAFE <= step <= _MAX_SAFE
    ):
        return None
    keys = tuple(chunk)
    kind = chunk["type"]
    if keys == _TEXT_CHUNK_KEYS:
        if kind == "text-delta":
            tag = "text-chunks"
        elif kind == "reasoning-delta":
            tag = "reasoning-chunks"
        else:
            return None
        text, call_id, named, name = chunk["text"], None, False, None
    elif kind != "tool-call-delta":
        return None
    elif keys == _NAMED_TOOL_CHUNK_KEYS:
        tag, call_id, named, name = "tool-call-chunks", chunk["id"], True, chunk["name"]
        text = chunk["argumentsDelta"]
        if type(name) is not str or type(call_id) is not str:
            return None
    elif keys == _TOOL_CHUNK_KEYS:
        tag, call_id, named, name = "tool-call-chunks", chunk["id"], False, None
        text = chunk["argumentsDelta"]
        if type(call_id) is not str:
            return None
    else:
        return None
    index = chunk["index"]
    if type(text) is not str or type(index) is not int or not -_MAX_SAFE <= index <= _MAX_SAFE:
        return None
    return (tag, turn, step, index, call_id, named, name), text


def member_data(member: Member, text: str) -> str:
    """`dumps(event["data"])` of a packable event left unpacked (a run too short), built from
    its member and `text`, the JSON of its payload text: `member_of` checked every other value
    (keys in this order, safe integers, strings)."""
    tag, turn, step, index, call_id, named, name = member[0]
    head = f'{{"turn":{turn},"step":{step},"chunk":{{"type":"{_DELTA_OF_TAG[tag]}","index":{index}'
    if call_id is None:
        return f'{head},"text":{text}}}}}'
    named_part = f',"name":{dumps(name)}' if named else ""
    return f'{head},"id":{dumps(call_id)}{named_part},"argumentsDelta":{text}}}}}'


def member_line(event: JsonObject, member: Member, text: str) -> str:
    """`dumps(event)` of a packable event left unpacked, from its member (`member_data`)."""
    data = member_data(member, text)
    return f'{{"type":"assistant/chunk","seq":{event["seq"]},"time":{event["time"]},"data":{data}}}'


def gap_after(previous: JsonObject, event: JsonObject) -> int | None:
    """The time gap of member `event` after member `previous` when it continues its run (the
    next seq, a safe gap; the run keys are compared apart), else None: the rule
    `pack_records` applies, inlined there because it runs per event."""
    gap = event["time"] - previous["time"]
    if event["seq"] == previous["seq"] + 1 and -_MAX_SAFE <= gap <= _MAX_SAFE:
        return gap  # type: ignore[no-any-return]
    return None


def row_line(key: tuple[Any, ...], seq0: int, time0: int, dt: str, texts: str) -> str:
    """`dumps` of the packed row of run key `key` whose first member has `seq0` and `time0`,
    from its gaps and its member texts already JSON and joined by commas (`dt`, `texts`):
    `member_of` checked every other value (safe integers, strings)."""
    tag, turn, step, index, call_id, named, name = key
    head = (
        f'{{"type":"{tag}","seq0":{seq0},"time0":{time0},"data":'
        f'{{"turn":{turn},"step":{step},"index":{index},"dt":[{dt}]'
    )
    if call_id is None:
        return f'{head},"texts":[{texts}]}}}}'
    named_part = f',"name":{dumps(name)}' if named else ""
    return f'{head},"id":{dumps(call_id)}{named_part},"args":[{texts}]}}}}'


def _row(key: tuple[Any, ...], run: Sequence[JsonObject], texts: list[str]) -> JsonObject:
    tag, turn, step, index, call_id, named, name = key
    first = run[0]
    dt = [run[k]["time"] - run[k - 1]["time"] for k in range(1, len(run))]
    data: JsonObject = {"turn": turn, "step": step, "index": index, "dt": dt}
    if tag == "tool-call-chunks":
        data["id"] = call_id
        if named:
            data["name"] = name
        data["args"] = texts
    else:
        data["texts"] = texts
    return {"type": tag, "seq0": first["seq"], "time0": first["time"], "data": data}


def encode_records(events: Sequence[JsonObject], *, pack: bool) -> list[JsonObject]:
    """The storage records of one batch: runs of >= 3 packable deltas packed when `pack`.

    Events are not copied; the caller serializes the result right away.
    """
    if not pack:
        return list(events)
    members = [member_of(event) for event in events]
    return [
        events[record] if isinstance(record, int) else record[1]
        for record in pack_records(events, members)
    ]


def pack_records(
    events: Sequence[JsonObject], members: Sequence[Member | None]
) -> list[int | tuple[int, JsonObject]]:
    """The packing rule: the records of one batch, each the index of an event stored as it is
    or a packed row with the index of its first member. `members[k]` is
    `member_of(events[k])` (made ahead by an encoder that keeps it from when the event was
    admitted)."""
    if len(members) - members.count(None) < MIN_RUN:
        return list(range(len(members)))  # no run can be long enough
    records: list[int | tuple[int, JsonObject]] = []
    run: list[int] = []
    texts: list[str] = []
    run_key: tuple[Any, ...] | None = None
    for index, member in enumerate(members):
        if member is not None:
            key, text = member
            if key == run_key:
                event, previous = events[index], events[run[-1]]
                gap = event["time"] - previous["time"]
                if event["seq"] == previous["seq"] + 1 and -_MAX_SAFE <= gap <= _MAX_SAFE:
                    run.append(index)
                    texts.append(text)
                    continue
        _close_run(records, events, run, texts, run_key)
        if member is None:
            records.append(index)
            run, texts, run_key = [], [], None
        else:
            run, texts, run_key = [index], [member[1]], member[0]
    _close_run(records, events, run, texts, run_key)
    return records


def _close_run(
    records: list[int | tuple[int, JsonObject]],
    events: Sequence[JsonObject],
    run: list[int],
    texts: list[str],
    key: tuple[Any, ...] | None,
) -> None:
    if len(run) >= MIN_RUN:
        records.append((run[0], _row(key, [events[index] for index in run], texts)))  # type: ignore[arg-type]
    else:
        records.extend(run)


def decode_record(record: JsonObject) -> list[JsonObject]:
    """The events a storage record stands for: a packed row's members, else the record itself.

    Raises `MalformedStorageRowError` for an invalid packed row.
    """
    if record.get("type") not in CHUNK_TAGS:
        return [record]
    check_row(record)
    return row_members(record)


def check_row(record: JsonObject) -> int:
    """Check a packed row (a record whose type is in `CHUNK_TAGS`); return its member count.

    Raises `MalformedStorageRowError` for an invalid row.
    """
    tag = record["type"]
    if record.keys() != _ROW_KEYS:
        raise MalformedStorageRowError(tag, "row keys must be exactly type, seq0, time0, data")
    seq0, time0, data = record["seq0"], record["time0"], record["data"]
    if not (_is_int(seq0) and seq0 >= 0):
        raise MalformedStorageRowError(tag, "seq0 must be a non-negative safe integer")
    if not _is_int(time0):
        raise MalformedStorageRowError(tag, "time0 must be a safe integer")
    if type(data) is not dict:
        raise MalformedStorageRowError(tag, "data must be an object")
    tool = tag == "tool-call-chunks"
    keys = data.keys() - {"name"} if tool else data.keys()
    if keys != (_TOOL_DATA_KEYS if tool else _TEXT_DATA_KEYS):
        expected = "turn, step, index, dt, " + ("id, name?, args" if tool else "texts")
        raise MalformedStorageRowError(tag, f"data keys must be exactly {expected}")
    turn, step, index = data["turn"], data["step"], data["index"]
    if not (_is_int(turn) and _is_int(step) and _is_int(index)):
        raise MalformedStorageRowError(tag, "turn/step/index must be safe integers")
    texts = data["args" if tool else "texts"]
    if type(texts) is not list or not texts or any(type(t) is not str for t in texts):
        field = "args" if tool else "texts"
        raise MalformedStorageRowError(tag, f"{field} must be a non-empty array of strings")
    dt = data["dt"]
    if type(dt) is not list or len(dt) != len(texts) - 1:
        raise MalformedStorageRowError(tag, "dt must be an array with one entry fewer than members")
    if seq0 + len(texts) - 1 > _MAX_SAFE:
        raise MalformedStorageRowError(tag, "member seq exceeds the safe integer range")
    if any(type(gap) is not int for gap in dt):
        raise MalformedStorageRowError(tag, "dt entries must be integers")
    if dt and (min(dt) < -_MAX_SAFE or max(dt) > _MAX_SAFE):
        raise MalformedStorageRowError(tag, "dt entries must be safe integers")
    times = list(accumulate(dt, initial=time0))
    if min(times) < -_MAX_SAFE or max(times) > _MAX_SAFE:
        raise MalformedStorageRowError(tag, "member time exceeds the safe integer range")
    if tool:
        if type(data["id"]) is not str:
            raise MalformedStorageRowError(tag, "id must be a string")
        if "name" in data and type(data["name"]) is not str:
            raise MalformedStorageRowError(tag, "name must be a string")
    return len(texts)


def row_members(record: JsonObject, first: int = 0, stop: int | None = None) -> list[JsonObject]:
    """Members `first..stop` (default: all) of a row `check_row` accepted, as new objects."""
    tag, seq0, data = record["type"], record["seq0"], record["data"]
    tool = tag == "tool-call-chunks"
    texts: list[str] = data["args" if tool else "texts"]
    stop = len(texts) if stop is None else stop
    head: JsonObject = {"type": _DELTA_OF_TAG[tag], "index": data["index"]}
    if tool:
        head["id"] = data["id"]
        if "name" in data:
            head["name"] = data["name"]
    text_key = "argumentsDelta" if tool else "text"
    turn, step = data["turn"], data["step"]
    time = record["time0"] + sum(data["dt"][:first])
    members: list[JsonObject] = []
    for k in range(first, stop):
        if k > first:
            time += data["dt"][k - 1]
        chunk = {**head, text_key: texts[k]}
        members.append(
            {
                "type": "assistant/chunk",
                "seq": seq0 + k,
                "time": time,
                "data": {"turn": turn, "step": step, "chunk": chunk},
            }
        )
    return members
