"""Events and headers as PostgreSQL rows, and reading stored rows back.

One row per event (docs/backends.md): `type`, `time`, `data` (the exact JSON text of the event's
`data`), `source_event_seqs` (bigint[] or NULL), `surface_op` (JSON text or NULL), `ignorable`
(boolean or NULL) and `key_order`, one letter per envelope key in the event's own order, so a
loaded event has the same JSON text as the one appended (live, closer and loaded orders differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence.backend import JsonObject
from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.header import header_columns, meta_of_columns
from plugins.session_persistence.records import RecordSequence

__all__ = [
    "EVENT_COLUMNS",
    "HEADER_COLUMNS",
    "EventColumns",
    "GroupArrays",
    "encode_events",
    "header_values",
    "int_array",
    "meta_of",
    "scan_rows",
    "text_array",
]

#: Columns of `dsh_events` a load reads, in this order.
EVENT_COLUMNS: Final = (
    "seq",
    "type",
    "time",
    "data",
    "source_event_seqs",
    "surface_op",
    "ignorable",
    "key_order",
)
#: `(meta key, dsh_sessions column, Python type)` of the header columns after `version, id`.
HEADER_COLUMNS: Final = (
    ("createdAt", "created_at", int),
    ("cwd", "cwd", str),
    ("parentSession", "parent_session", str),
    ("seedLength", "seed_length", int),
    ("origin", "origin", str),
    ("delegationDepth", "delegation_depth", int),
    ("agentPreset", "agent_preset", str),
)

_HEADER_NAMES: Final = tuple(column for _, column, _ in HEADER_COLUMNS)
_INT_COLUMNS: Final = {"version", *(column for _, column, kind in HEADER_COLUMNS if kind is int)}

_CODE: Final = {
    "type": "t",
    "seq": "s",
    "time": "m",
    "data": "d",
    "ignorable": "i",
    "sourceEventSeqs": "e",
    "surfaceOp": "o",
}
_KEY: Final = {code: key for key, code in _CODE.items()}
_INT64: Final = 2**63


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def text_array(values: Sequence[str | None]) -> str:
    """A PostgreSQL array literal of text values (NULL for None)."""
    return "{" + ",".join(["NULL" if v is None else _quoted(v) for v in values]) + "}"


def int_array(values: Sequence[int | None]) -> str:
    """A PostgreSQL array literal of integers (NULL for None)."""
    return "{" + ",".join(["NULL" if v is None else str(v) for v in values]) + "}"


@dataclass(slots=True)
class EventColumns:
    """A batch as parallel column arrays for one `INSERT ... SELECT FROM unnest(...)`."""

    seqs: list[int]
    types: list[str]
    times: list[int]
    data: list[str]
    source_event_seqs: list[str | None]
    surface_ops: list[str | None]
    ignorable: list[bool | None]
    key_orders: list[str]

    def extend(self, other: EventColumns) -> None:
        """Append `other`'s rows after these."""
        self.seqs += other.seqs
        self.types += other.types
        self.times += other.times
        self.data += other.data
        self.source_event_seqs += other.source_event_seqs
        self.surface_ops += other.surface_ops
        self.ignorable += other.ignorable
        self.key_orders += other.key_orders

    def after(self, count: int) -> EventColumns:
        """These rows without the first `count`."""
        return EventColumns(
            self.seqs[count:],
            self.types[count:],
            self.times[count:],
            self.data[count:],
            self.source_event_seqs[count:],
            self.surface_ops[count:],
            self.ignorable[count:],
            self.key_orders[count:],
        )

    def begins(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Whether stored `rows` (read as `EVENT_COLUMNS`) are these rows' first ones, column
        for column (the same seqs, the same JSON texts)."""
        if len(rows) > len(self.seqs):
            return False
        for index, (seq, kind, time, data, sources, surface_op, ignorable, order) in enumerate(
            rows
        ):
            stored_sources = None if sources is None else int_array(sources)
            if (
                seq != self.seqs[index]
                or kind != self.types[index]
                or time != self.times[index]
                or data != self.data[index]
                or stored_sources != self.source_event_seqs[index]
                or surface_op != self.surface_ops[index]
                or ignorable != self.ignorable[index]
                or order != self.key_orders[index]
            ):
                return False
        return True

    def arrays(self) -> dict[str, str]:
        """The columns as array literals, the statements' parameters `seqs`, `types`, `times`,
        `data`, `ses`, `surface_ops`, `ignorable`, `key_orders` (one text parameter each is far
        cheaper to send than a Python list adapted element by element)."""
        flags = {None: "NULL", True: "t", False: "f"}
        return {
            "seqs": int_array(self.seqs),
            "types": text_array(self.types),
            "times": int_array(self.times),
            "data": text_array(self.data),
            "ses": text_array(self.source_event_seqs),
            "surface_ops": text_array(self.surface_ops),
            "ignorable": "{" + ",".join([flags[flag] for flag in self.ignorable]) + "}",
            "key_orders": text_array(self.key_orders),
        }


def _empty() -> EventColumns:
    return EventColumns([], [], [], [], [], [], [], [])


@dataclass(slots=True)
class GroupArrays:
    """The parameters of one group append (`Statements.append_group`), gathered session by
    session: one element per session in the session arrays, one per row in the event ones."""

    ids: list[str] = field(default_factory=list)
    first: list[bool] = field(default_factory=list)
    owned: list[bool] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    lock_pids: list[int] = field(default_factory=list)
    tokens: list[str | None] = field(default_factory=list)
    seens: list[int | None] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    #: The `header_values` columns (and `incarnation`) of first batches, None for the others.
    headers: dict[str, list[Any]] = field(
        default_factory=lambda: {
            column: [] for column in ("version", *_HEADER_NAMES, "incarnation")
        }
    )
    event_ids: list[str] = field(default_factory=list)
    events: EventColumns = field(default_factory=_empty)

    def add(
        self,
        session_id: str,
        columns: EventColumns,
        *,
        key: int,
        lock_pid: int,
        token: str | None,
        seen: int | None,
        header: dict[str, Any] | None,
    ) -> None:
        """One session's append: its lock key, the lock connection that must hold the key,
        its owner token (None: not owned, take the lock for the transaction), the `next_seq`
        this instance last saw, its rows, and for a first batch (creating the session row)
        its `header_values` plus `incarnation`."""
        start = columns.seqs[0] if columns.seqs else 0
        self.ids.append(session_id)
        self.first.append(header is not None)
        for column, values in self.headers.items():
            values.append(None if header is None else header[column])
        self.owned.append(token is not None)
        self.keys.append(key)
        self.lock_pids.append(lock_pid)
        self.tokens.append(token)
        self.seens.append(seen)
        self.starts.append(start)
        self.ends.append(start + len(columns.seqs))
        self.event_ids += [session_id] * len(columns.seqs)
        self.events.extend(columns)

    def params(self) -> dict[str, str]:
        """The statement's parameters as array literals."""
        flags = {True: "t", False: "f"}
        unsigned = [key % 2**64 for key in self.keys]
        header = {
            column: int_array(values) if column in _INT_COLUMNS else text_array(values)
            for column, values in self.headers.items()
        }
        return {
            "ids": text_array(self.ids),
            "first": "{" + ",".join([flags[flag] for flag in self.first]) + "}",
            "owned": "{" + ",".join([flags[flag] for flag in self.owned]) + "}",
            "keys": int_array(self.keys),
            "lock_pids": int_array(self.lock_pids),
            "his": int_array([key >> 32 for key in unsigned]),
            "los": int_array([key & 0xFFFFFFFF for key in unsigned]),
            "tokens": text_array(self.tokens),
            "seens": int_array(self.seens),
            "starts": int_array(self.starts),
            "ends": int_array(self.ends),
            **header,
            "event_ids": text_array(self.event_ids),
            **self.events.arrays(),
        }


def _refuse(session_id: str, seq: object, why: str) -> SessionPersistenceError:
    return SessionPersistenceError(
        f'session "{session_id}" event at seq {seq} cannot be stored by '
        f"session-persistence-postgres: {why}"
    )


def _is_int64(value: object) -> bool:
    return type(value) is int and -_INT64 <= value < _INT64


def encode_events(session_id: str, events: Sequence[JsonObject]) -> EventColumns:
    """The column arrays of `events`; refuses envelopes the row shape cannot hold."""
    out = _empty()
    for event in events:
        seq = event.get("seq")
        try:
            order = "".join([_CODE[key] for key in event])
        except KeyError as error:
            raise _refuse(session_id, seq, f"unknown envelope key {dumps(error.args[0])}") from None
        kind, time = event.get("type"), event.get("time")
        if (
            type(seq) is not int
            or type(time) is not int
            or type(kind) is not str
            or not (_is_int64(seq) and _is_int64(time))
            or "d" not in order
        ):
            raise _refuse(session_id, seq, "it needs a string type, integer seq and time, and data")
        sources = event.get("sourceEventSeqs")
        if sources is None:
            source_text = None
        elif type(sources) is list and all(_is_int64(value) for value in sources):
            source_text = "{" + ",".join([str(value) for value in sources]) + "}"
        else:
            raise _refuse(session_id, seq, "sourceEventSeqs must be a list of integers")
        ignorable = event.get("ignorable")
        if ignorable is not None and type(ignorable) is not bool:
            raise _refuse(session_id, seq, "ignorable must be a boolean")
        out.seqs.append(seq)
        out.types.append(kind)
        out.times.append(time)
        out.data.append(dumps(event["data"]))
        out.source_event_seqs.append(source_text)
        out.surface_ops.append(dumps(event["surfaceOp"]) if "o" in order else None)
        out.ignorable.append(ignorable)
        out.key_orders.append(order)
    return out


def _decode(row: Sequence[Any]) -> JsonObject | None:
    """The event of one stored row, or None when the row is not a readable event."""
    seq, kind, time, data, sources, surface_op, ignorable, order = row
    if type(order) is not str or len(set(order)) != len(order) or not {*"tsmd"} <= {*order}:
        return None
    if type(kind) is not str or time is None or data is None:
        return None
    event: JsonObject = {}
    try:
        for code in order:
            key = _KEY[code]
            if code == "t":
                event[key] = kind
            elif code == "s":
                event[key] = seq
            elif code == "m":
                event[key] = time
            elif code == "d":
                event[key] = loads(data)
            elif code == "o":
                if surface_op is None:
                    return None
                event[key] = loads(surface_op)
            elif code == "e":
                if sources is None or None in sources:
                    return None
                event[key] = list(sources)
            elif ignorable is None:
                return None
            else:
                event[key] = ignorable
    except (KeyError, ValueError):
        return None
    return event


def _bad_row(seq: int) -> str:
    return f"corrupt session log: invalid committed physical row at seq {seq}"


def scan_rows(rows: Sequence[Sequence[Any]], next_seq: int) -> list[JsonObject]:
    """The events of a session's rows (ordered by seq). Rows are written by transactions, which
    never tear: a row that is not a readable event, a missing seq, or a `next_seq` other than
    where the rows end is `SessionPersistenceCorruptionError` naming the seq (the seam's rule
    for transactional storage)."""
    records = RecordSequence(can_tear=False, gap=lambda expected, _got: _bad_row(expected))
    for row in rows:
        event = _decode(row)
        if event is None:
            records.bad(_bad_row(len(records.events)))
        else:
            records.add((event,))
    records.finish(
        next_seq,
        lambda stored: (
            f"corrupt session log: the session row's next seq is {stored} but its rows end before "
            f"seq {len(records.events)}"
        ),
    )
    return records.events


def header_values(meta: JsonObject) -> dict[str, Any]:
    """The `dsh_sessions` header columns of `meta` (`delegationDepth` stored as 0 when absent)."""
    session_id = meta["id"]
    known = {"version", "id", *(key for key, _, _ in HEADER_COLUMNS)}
    for key in meta:
        if key not in known:
            raise SessionPersistenceError(
                f'session "{session_id}" metadata cannot be stored by '
                f"session-persistence-postgres: unknown header key {dumps(key)}"
            )
    stored = header_columns(meta)
    values: dict[str, Any] = {"version": meta.get("version", 0), "id": session_id}
    for key, column, kind in HEADER_COLUMNS:
        value = stored[key]
        if value is not None and (
            type(value) is not kind or (kind is int and not _is_int64(value))
        ):
            expected = "an integer" if kind is int else "a string"
            raise SessionPersistenceError(
                f'session "{session_id}" metadata cannot be stored by '
                f"session-persistence-postgres: {key} must be {expected}, got {dumps(value)}"
            )
        values[column] = value
    if not _is_int64(values["version"]):
        raise SessionPersistenceError(
            f'session "{session_id}" metadata cannot be stored by session-persistence-postgres: '
            "version must be an integer"
        )
    return values


def meta_of(row: Sequence[Any]) -> JsonObject:
    """The session meta of a `dsh_sessions` row read as `version, id, <HEADER_COLUMNS>`."""
    return meta_of_columns(tuple(row))
