"""Event rows of the `events` table: encoding a batch and scanning a stored log (docs/backends.md).

One row per event, or one per packed chunk run (`type` = the packed tag, `seq`/`time` = the run's
`seq0`/`time0`, `ignorable = 0`, at most 1024 members and 1 MiB of `data`). Columns:

- `data`: the JSON text `jsonutil.dumps` writes; from 4096 bytes on a zstd BLOB when smaller.
- `surface_op`: the JSON text of `surfaceOp`, NULL when absent.
- `source_event_seqs`: NULL when absent, else LEB128 varints: the first value, then each delta
  `d` zigzag-mapped (`2d` if `d >= 0`, else `2|d|-1`); an empty BLOB is `[]`.
- `ignorable`: 1 or NULL (0 on packed rows).
- `key_order` (**port**): 1 when `surfaceOp` precedes `sourceEventSeqs` (a repair closer), else
  NULL: envelopes reload in their written key order, `type, seq, time, data, ignorable?`, then
  the two surface keys.

A live session's rows are made as its events are admitted (`Ahead`): each event's row (its
`data` compressed at the write), or for a delta that packing may merge its run key and the JSON
of its text, so a write only packs, compresses large texts and binds; the rows are the same
whether an event was prepared or not (docs/performance.md).

A stored log is read back with `scan`: rows come from transactions, so any bad row (undecodable,
or not where the previous rows end) is corruption naming its seq, never a torn tail.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any, Final

import zstandard

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence import ahead
from plugins.session_persistence.ahead import prepared
from plugins.session_persistence.packing import (
    CHUNK_TAGS,
    MIN_RUN,
    MalformedStorageRowError,
    Member,
    decode_record,
    encode_records,
    member_data,
    pack_records,
)
from plugins.session_persistence.records import RecordSequence

__all__ = [
    "MAX_PACKED_BYTES",
    "MAX_PACKED_MEMBERS",
    "ZSTD_THRESHOLD",
    "Ahead",
    "Row",
    "decode_row",
    "decode_seqs",
    "encode_rows",
    "encode_seqs",
    "scan",
]

JsonObject = dict[str, Any]
#: `(seq, type, time, data, source_event_seqs, surface_op, ignorable, key_order)`
Row = tuple[int, str, int, str | bytes, bytes | None, str | None, int | None, int | None]

#: Largest packed row, in members and in bytes of its `data` JSON text.
MAX_PACKED_MEMBERS: Final = 1024
MAX_PACKED_BYTES: Final = 1 << 20
#: `data` texts of at least this many bytes are stored zstd-compressed when that is smaller.
ZSTD_THRESHOLD: Final = 4096

_SURFACE_FIRST: Final = 1
_codecs = threading.local()


def _compress(raw: bytes) -> bytes:
    """zstd-compress with this thread's compressor (zstandard objects are not thread-safe)."""
    compressor = getattr(_codecs, "compressor", None)
    if compressor is None:
        compressor = _codecs.compressor = zstandard.ZstdCompressor(level=3)
    return bytes(compressor.compress(raw))


def _decompress(blob: bytes) -> bytes:
    decompressor = getattr(_codecs, "decompressor", None)
    if decompressor is None:
        decompressor = _codecs.decompressor = zstandard.ZstdDecompressor()
    return bytes(decompressor.decompress(blob))


class _BadRow(ValueError):
    """A row that does not decode."""


# ---- LEB128 ---------------------------------------------------------------------------------


def _varint(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_seqs(seqs: Sequence[int]) -> bytes:
    """`sourceEventSeqs` as LEB128 varints: the first value, then zigzag-mapped deltas."""
    out = bytearray()
    previous = 0
    for index, value in enumerate(seqs):
        if index == 0:
            if value < 0:
                raise ValueError(f"sourceEventSeqs holds a negative seq {value}")
            _varint(value, out)
        else:
            delta = value - previous
            _varint(2 * delta if delta >= 0 else -2 * delta - 1, out)
        previous = value
    return bytes(out)


def decode_seqs(blob: bytes) -> list[int]:
    """The inverse of `encode_seqs`; raises `ValueError` for a truncated or negative list."""
    values: list[int] = []
    current = shift = 0
    for byte in blob:
        current |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        if values:
            delta = current >> 1 if not current & 1 else -((current + 1) >> 1)
            current = values[-1] + delta
            if current < 0:
                raise ValueError("sourceEventSeqs decodes to a negative seq")
        values.append(current)
        current = shift = 0
    if shift:
        raise ValueError("sourceEventSeqs ends inside a varint")
    return values


# ---- writing --------------------------------------------------------------------------------


def _stored(text: str, raw: bytes) -> str | bytes:
    """The `data` column for JSON `text` (UTF-8 `raw`): zstd from 4096 bytes on, if smaller."""
    if len(raw) < ZSTD_THRESHOLD:
        return text
    packed = _compress(raw)
    return packed if len(packed) < len(raw) else text


def _data_column(text: str) -> str | bytes:
    """The `data` column for JSON `text`."""
    if len(text) * 4 < ZSTD_THRESHOLD:  # at most 4 UTF-8 bytes a character: skip encoding
        return text
    return _stored(text, text.encode())


def _compressed(row: Row) -> Row:
    """A row `admit` prepared, its `data` text compressed now if that is smaller (at the write,
    so off the loop thread when the write is)."""
    text: str = row[3]  # type: ignore[assignment]
    data = _data_column(text)
    return row if data is text else (row[0], row[1], row[2], data, *row[4:])


def _event_row(event: JsonObject, *, compress: bool = True) -> Row:
    """The row of an event stored as it is (its `data` text left uncompressed unless
    `compress`)."""
    text = dumps(event["data"])
    seqs = event.get("sourceEventSeqs")
    surface_first = False
    if seqs is not None and "surfaceOp" in event:
        keys = list(event)
        surface_first = keys.index("surfaceOp") < keys.index("sourceEventSeqs")
    return (
        event["seq"],
        event["type"],
        event["time"],
        _data_column(text) if compress else text,
        None if seqs is None else encode_seqs(seqs),
        dumps(event["surfaceOp"]) if "surfaceOp" in event else None,
        1 if event.get("ignorable") is True else None,
        _SURFACE_FIRST if surface_first else None,
    )


def _packed_rows(
    members: list[JsonObject], texts: list[str | None], record: JsonObject | None = None
) -> Iterable[Row]:
    """Rows of one packable run (`record` is its packed form when already built; `texts[k]` is
    the JSON of member k's text when prepared, else None), split to the member and byte limits;
    a rest shorter than a packable run is stored unpacked."""
    if len(members) < MIN_RUN:
        yield from (_event_row(event) for event in members)
        return
    if len(members) > MAX_PACKED_MEMBERS:
        for start in range(0, len(members), MAX_PACKED_MEMBERS):
            stop = start + MAX_PACKED_MEMBERS
            yield from _packed_rows(members[start:stop], texts[start:stop])
        return
    if record is None:
        (record,) = encode_records(members, pack=True)
    data = record["data"]
    text = dumps(data) if None in texts else _data_text(data, texts)  # type: ignore[arg-type]
    raw = text.encode()
    if len(raw) > MAX_PACKED_BYTES:
        half = len(members) // 2
        yield from _packed_rows(members[:half], texts[:half])
        yield from _packed_rows(members[half:], texts[half:])
        return
    yield (record["seq0"], record["type"], record["time0"], _stored(text, raw), None, None, 0, None)


def _member_row(event: JsonObject, member: Member, text: str) -> Row:
    """The row of a packable delta stored unpacked (a run too short), its `data` built from
    its prepared text (`packing.member_data`): `member_of` allows no other column."""
    data = _data_column(member_data(member, text))
    return (event["seq"], event["type"], event["time"], data, None, None, None, None)


def _data_text(data: JsonObject, texts: list[str]) -> str:
    """`dumps(data)` of a packed row whose member texts are already JSON (`texts`): its other
    values are safe integers and strings, in `packing`'s key order."""
    dt = ",".join(map(str, data["dt"]))
    head = f'{{"turn":{data["turn"]},"step":{data["step"]},"index":{data["index"]},"dt":[{dt}]'
    joined = ",".join(texts)
    if "texts" in data:
        return f'{head},"texts":[{joined}]}}'
    name = f',"name":{dumps(data["name"])}' if "name" in data else ""
    return f'{head},"id":{dumps(data["id"])}{name},"args":[{joined}]}}'


#: An `ahead.Ahead` entry's row (None for a delta), packing member and JSON text.
_ROW: Final = itemgetter(1)
_MEMBER: Final = itemgetter(2)
_TEXT: Final = itemgetter(3)


class Ahead(ahead.Ahead[Row]):
    """Rows of one live session prepared as its events are admitted (`ahead.Ahead`); large
    `data` is compressed at the write, never on the loop thread."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(_plain_row, pack=True)


def _plain_row(event: JsonObject) -> Row:
    return _event_row(event, compress=False)


def encode_rows(events: Sequence[JsonObject], ahead: Ahead | None = None) -> list[Row]:
    """The `events` rows of one batch, packing runs of >= 3 streaming deltas; `ahead` supplies
    what was prepared (an event without it is encoded here). A batch all prepared is taken in
    one call (`Ahead.take_all`); without a delta among it, its rows are the prepared ones."""
    taken = None if ahead is None else ahead.take_all(events)
    if taken is None:
        ready, members, texts = prepared(events, ahead, pack=True)
    elif not any(map(_MEMBER, taken)):
        return [_compressed(row) for row in map(_ROW, taken)]
    else:
        ready, members, texts = (list(map(get, taken)) for get in (_ROW, _MEMBER, _TEXT))
    if not any(members):  # nothing packable: each event is its own row
        return [
            _event_row(event) if row is None else _compressed(row)
            for event, row in zip(events, ready, strict=True)
        ]
    rows: list[Row] = []
    for record in pack_records(events, members):
        if isinstance(record, int):
            row, member, text = ready[record], members[record], texts[record]
            if row is not None:
                rows.append(_compressed(row))
            elif member is None or text is None:
                rows.append(_event_row(events[record]))
            else:
                rows.append(_member_row(events[record], member, text))
        else:
            start, packed = record
            stop = start + len(packed["data"]["dt"]) + 1
            rows.extend(_packed_rows(list(events[start:stop]), texts[start:stop], packed))
    return rows


# ---- reading --------------------------------------------------------------------------------


def _json_column(value: object) -> Any:
    if isinstance(value, bytes):
        try:
            value = _decompress(value).decode()
        except (zstandard.ZstdError, UnicodeDecodeError) as error:
            raise _BadRow(f"data does not decompress: {error}") from None
    if not isinstance(value, str):
        raise _BadRow("data is neither text nor a zstd blob")
    return loads(value)


def decode_row(row: Row) -> list[JsonObject]:
    """The events one row stands for; raises `ValueError` when the row is invalid."""
    seq, kind, time, data, seqs, op, ignorable, key_order = row
    if kind in CHUNK_TAGS:
        if ignorable != 0 or seqs is not None or op is not None or key_order is not None:
            raise _BadRow("packed row with event columns")
        record = {"type": kind, "seq0": seq, "time0": time, "data": _json_column(data)}
        try:
            return decode_record(record)
        except MalformedStorageRowError as error:
            raise _BadRow(str(error)) from None
    if ignorable not in (None, 1) or key_order not in (None, _SURFACE_FIRST):
        raise _BadRow("bad ignorable or key_order column")
    event: JsonObject = {"type": kind, "seq": seq, "time": time, "data": _json_column(data)}
    if ignorable == 1:
        event["ignorable"] = True
    seq_list = None if seqs is None else decode_seqs(seqs)
    if key_order == _SURFACE_FIRST:
        if op is None or seq_list is None:
            raise _BadRow("key_order set without both surface columns")
        event["surfaceOp"] = loads(op)
        event["sourceEventSeqs"] = seq_list
    else:
        if seq_list is not None:
            event["sourceEventSeqs"] = seq_list
        if op is not None:
            event["surfaceOp"] = loads(op)
    return [event]


def _bad_row(seq: int) -> str:
    return f"corrupt session log: invalid committed physical row at seq {seq}"


def scan(rows: Iterable[Row], next_seq: int) -> list[JsonObject]:
    """Decode rows in seq order. Rows are written by transactions, which never tear: a row that
    does not decode, a seq out of place, or a `next_seq` other than where the rows end is
    corruption naming the seq (the seam's rule for transactional storage)."""
    records = RecordSequence(can_tear=False, gap=lambda expected, _got: _bad_row(expected))
    for row in rows:
        try:
            decoded = decode_row(row)
        except ValueError:
            records.bad(_bad_row(len(records.events)))
        else:
            records.add(decoded)
    records.finish(
        next_seq,
        lambda stored: (
            f"corrupt session log: the session row's next seq is {stored} but its rows end before "
            f"seq {len(records.events)}"
        ),
    )
    return records.events
