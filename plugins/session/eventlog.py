"""A session's events as one read-only sequence (docs/event-log.md, "Events in memory").

`EventLog` is a stored prefix, kept in whatever form the log was loaded in (a compact one
decodes an event only when it is read), followed by the events appended since, as the dicts
`Session.append` made. Reading never exposes anything a caller could mutate to change what
the log holds: a compact prefix hands out a fresh object per read.

`plain_events` is how validation and the folds that ignore streamed chunks walk a log: a
compact prefix skips the members of packed chunk rows, whose shape the row codec checked when
the log was read.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, overload, runtime_checkable

#: `plugins.session.events.Event` (spelled out here: `events` imports this module).
Event = dict[str, Any]

__all__ = ["EventLog", "PlainEvents", "plain_events", "same_events"]


@runtime_checkable
class PlainEvents(Protocol):
    """A sequence that knows which of its events need no envelope check."""

    def plain_events(self) -> Iterator[tuple[int, Event]]:
        """`(index, event)` for every event except the members of packed chunk rows (valid
        `assistant/chunk` events by construction), in order."""
        ...


def plain_events(events: Sequence[Event]) -> Iterator[tuple[int, Event]]:
    """`(index, event)` of every event a check must look at (all of them for a plain list).

    `PlainEvents` is told by its method, as `isinstance` would, without the ~20-40 µs a
    runtime Protocol check costs on Python 3.11 (several per stored log read).
    """
    walk: Callable[[], Iterator[tuple[int, Event]]] | None = getattr(events, "plain_events", None)
    return enumerate(events) if walk is None else walk()


def same_events(left: Sequence[Event], right: object) -> bool:
    """Sequence equality: the same length and equal events in order (what `==` of two lists
    of dicts means)."""
    if not isinstance(right, Sequence) or isinstance(right, str | bytes):
        return False
    if left is right:
        return True
    return len(left) == len(right) and all(a == b for a, b in zip(left, right, strict=True))


class EventLog(Sequence[Event]):
    """`stored` (never copied; an `EventLog` contributes its own parts) then `tail`.

    Only the owning `Session` appends (`_push`); to everyone else it is read-only.
    """

    __slots__ = ("_base", "_push", "_stored", "_tail")

    def __init__(self, stored: Sequence[Event] = (), tail: Iterable[Event] = ()) -> None:
        if isinstance(stored, EventLog):
            tail = [*stored._tail, *tail]
            stored = stored._stored
        self._stored: Sequence[Event] = stored
        self._base = len(stored)
        self._tail: list[Event] = list(tail)
        #: Append one event (the owning `Session` only).
        self._push = self._tail.append

    def __len__(self) -> int:
        return self._base + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        base = self._base
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            if stop <= base:
                return self._stored[start:stop]
            if start >= base:
                return self._tail[start - base : stop - base]
            return EventLog(self._stored[start:], self._tail[: stop - base])
        if index < 0:
            index += len(self)
            if index < 0:
                raise IndexError("event index out of range")
        if index < base:
            return self._stored[index]
        return self._tail[index - base]

    def __iter__(self) -> Iterator[Event]:
        yield from self._stored
        yield from self._tail

    def __eq__(self, other: object) -> bool:
        return same_events(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<EventLog {len(self)} events ({self._base} stored)>"

    def __copy__(self) -> EventLog:
        """A snapshot: the same stored prefix, the appended events so far."""
        return EventLog(self)

    def __deepcopy__(self, memo: dict[int, object]) -> list[Event]:
        """Plain data to edit: a list of copies of every event."""
        return [copy.deepcopy(event, memo) for event in self]

    def plain_events(self) -> Iterator[tuple[int, Event]]:
        """See `PlainEvents`: the stored prefix's, then every appended event."""
        yield from plain_events(self._stored)
        for offset, event in enumerate(self._tail):
            yield self._base + offset, event
