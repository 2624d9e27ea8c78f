"""Stored events kept as the records they were read from (docs/event-log.md, "Events in
memory").

A loaded log is mostly bytes nobody reads again: a 16 KiB tool result, or a packed row of
chunk deltas that is ~35 bytes per member on disk and ~850 as dicts. `PackedEvents` holds the
storage records as read (spans of one or more byte buffers: the raw file, or each decompressed
frame) plus one index entry per record, and decodes an event when it is read: a plain record
is parsed into a fresh dict each time, a packed row is parsed once into a private one-row cache
and each member is built anew from it. Nothing a reader gets back shares an object with
another read, so mutating it cannot change the log.

`PackedBuilder` is what a reader fills, record by record, once it has checked each record
(the records must be valid: plain records are JSON objects, packed rows passed `check_row`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import overload

from plugins.session.eventlog import same_events
from plugins.session.events import Event
from plugins.session.jsonutil import loads

from .packing import row_members

__all__ = ["PackedBuilder", "PackedEvents"]


class _Index:
    """The records of one load: where each one's bytes are and which seqs it holds."""

    __slots__ = ("buffers", "end", "first", "row", "segment", "start")

    def __init__(self) -> None:
        self.buffers: list[memoryview] = []
        self.segment = array("I")  # buffer of each record
        self.start = array("Q")  # [start, end) of each record in its buffer
        self.end = array("Q")
        self.first = array("Q")  # seq of each record's first event
        self.row = bytearray()  # 1 for a packed row, 0 for a plain record

    def text(self, record: int) -> str:
        view = self.buffers[self.segment[record]]
        return str(view[self.start[record] : self.end[record]], "utf-8")


class PackedBuilder:
    """Collects the checked records of one log in storage order; `build()` seals them."""

    __slots__ = ("_count", "_index")

    def __init__(self) -> None:
        self._index = _Index()
        self._count = 0

    def buffer(self, data: bytes) -> None:
        """The buffer the following records' spans point into (kept, never copied)."""
        self._index.buffers.append(memoryview(data))

    def add(self, start: int, end: int, count: int, *, row: bool) -> None:
        """One record: bytes `[start, end)` of the current buffer, standing for the next
        `count` events (`row`: a packed row; else one plain event)."""
        index = self._index
        index.segment.append(len(index.buffers) - 1)
        index.start.append(start)
        index.end.append(end)
        index.first.append(self._count)
        index.row.append(row)
        self._count += count

    def __len__(self) -> int:
        return self._count

    def build(self) -> PackedEvents:
        return PackedEvents(self._index, 0, self._count)


class PackedEvents(Sequence[Event]):
    """An immutable sequence of stored events decoded on read (see the module docstring).

    Slices with step 1 are views over the same records; `==` compares event by event with any
    sequence (a list of dicts included).
    """

    __slots__ = ("_cache", "_hi", "_index", "_lo")

    def __init__(self, index: _Index, lo: int, hi: int) -> None:
        self._index = index
        self._lo = lo
        self._hi = hi
        #: The last packed row read: (record, its parsed object). Private: members are new
        #: objects built from it.
        self._cache: tuple[int, Event] | None = None

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return PackedEvents(self._index, self._lo + start, self._lo + max(start, stop))
        size = self._hi - self._lo
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("event index out of range")
        seq = self._lo + index
        record = bisect_right(self._index.first, seq) - 1
        if not self._index.row[record]:
            event: Event = loads(self._index.text(record))
            return event
        offset = seq - self._index.first[record]
        return row_members(self._row(record), offset, offset + 1)[0]

    def _row(self, record: int) -> Event:
        cached = self._cache
        if cached is not None and cached[0] == record:
            return cached[1]
        row: Event = loads(self._index.text(record))
        self._cache = (record, row)
        return row

    def _records(self) -> Iterator[tuple[int, int, int]]:
        """`(record, first, stop)`: each record overlapping the view and the member range of
        it that lies inside."""
        index = self._index
        if self._lo >= self._hi:
            return
        first = index.first
        record = bisect_right(first, self._lo) - 1
        while record < len(first) and first[record] < self._hi:
            begin = first[record]
            end = first[record + 1] if record + 1 < len(first) else self._hi
            yield record, max(self._lo, begin) - begin, min(self._hi, end) - begin
            record += 1

    def __iter__(self) -> Iterator[Event]:
        index = self._index
        for record, start, stop in self._records():
            if index.row[record]:
                yield from row_members(loads(index.text(record)), start, stop)
            else:
                yield loads(index.text(record))

    def plain_events(self) -> Iterator[tuple[int, Event]]:
        """`(index, event)` of every plain record in the view (members of packed rows are
        `assistant/chunk` events whose shape `check_row` proved)."""
        index = self._index
        for record, _, _ in self._records():
            if not index.row[record]:
                yield index.first[record] - self._lo, loads(index.text(record))

    def __eq__(self, other: object) -> bool:
        return same_events(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<PackedEvents {len(self)} events>"

    def __copy__(self) -> PackedEvents:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, object]) -> list[Event]:
        """Plain data to edit: every event decoded into a list (each one a fresh object)."""
        return list(self)
