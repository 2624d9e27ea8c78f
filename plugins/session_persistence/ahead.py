"""Encoding ahead: what a backend prepares for each live event when it is admitted.

`Ahead` keeps, per live session, each admitted event's encoding (a JSONL line, an SQLite row)
or, for a delta that packing may merge, its run key and the JSON of its text, and where it
stands in its run of deltas (`packing`'s rule, applied as each delta is admitted); the write that
stores the events takes them (`take`, or `take_all` for a batch all prepared) and encodes only
what was not prepared. When a run of deltas too short to pack (one or two, as in a step with a
short answer) ends, those deltas get their unpacked encoding too (`encode_member`): the write
still decides the packing, so that encoding is only used when the write stores them unpacked.
`Handoff` is the `LiveEncoder` of a backend whose `append_batch` picks a session's `Ahead` up from
a dict, so every durable write is still one `append_batch` call (docs/performance.md, "encoding
ahead").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from itertools import repeat, starmap
from operator import is_, itemgetter
from typing import Any, Generic, TypeVar

from plugins.session.jsonutil import dumps

from .backend import JsonObject, PersistenceBackend
from .packing import MIN_RUN, Member, gap_after, member_of

__all__ = ["Ahead", "Handoff", "prepared"]

T = TypeVar("T", covariant=True)
E = TypeVar("E")
#: The `Ahead` kind a backend's `append_batch` picks up.
A = TypeVar("A", bound="Ahead[object]")

#: The unpacked encoding of a packable delta from its member and the JSON of its text
#: (`packing.member_line` for JSONL).
EncodeMember = Callable[[JsonObject, Member, str], T]


class Ahead(Generic[T]):
    """Prepared encodings of one live session, made on the loop thread (`admit`) and taken by
    the write that stores them (`take`, `take_all`), possibly on the I/O thread: `deque`
    appends and pops are atomic, and the coordinator never overlaps two writes of one session."""

    __slots__ = ("_encode", "_encode_member", "_last", "_pack", "_ready", "_run")

    def __init__(
        self,
        encode: Callable[[JsonObject], T],
        *,
        pack: bool,
        encode_member: EncodeMember[T] | None = None,
    ) -> None:
        self._encode = encode
        self._encode_member = encode_member
        self._pack = pack
        #: `[event, encoding, member, text, gap]`: the event, then its encoding (an event
        #: stored as it is) or its packing member and the JSON of its text (a packable delta,
        #: whose encoding is made only once its run is known to be too short), and for a delta
        #: that continues the run of the entry before it its time gap after it (else None). A
        #: list, so that the encoding can be filled in while a write on the I/O thread may be
        #: taking entries.
        self._ready: deque[list[Any]] = deque()
        #: The entry admitted last (None after an event that did not encode).
        self._last: list[Any] | None = None
        #: The first entries (up to `MIN_RUN`) of the run of deltas admitted last.
        self._run: list[list[Any]] = []

    def admit(self, event: JsonObject) -> None:
        """Prepare `event` (admitted in seq order); one that does not encode is left to the
        write, which raises as it always did. A delta continues the run of the delta admitted
        just before it by `packing`'s rule (the same key, the next seq, a safe gap); any other
        event ends that run."""
        last = self._last
        try:
            member = member_of(event) if self._pack else None
            if member is None:
                entry = [event, self._encode(event), None, None, None]
            else:
                entry = [event, None, member, dumps(member[1]), None]
                if last is not None and last[2] is not None and last[2][0] == member[0]:
                    entry[4] = gap_after(last[0], event)
        except Exception:
            self._last = None
            return
        if entry[4] is None:
            if self._run:
                self._end_run()
            self._run = [entry] if member is not None else []
        elif len(run := self._run) < MIN_RUN:
            run.append(entry)
        self._last = entry
        self._ready.append(entry)

    def _end_run(self) -> None:
        """Give the members of the run admitted last, when too short to pack, their unpacked
        encoding (the write still decides the packing, so it uses them only when it stores
        them unpacked)."""
        encode = self._encode_member
        if encode is not None and len(self._run) < MIN_RUN:
            for entry in self._run:
                entry[1] = encode(entry[0], entry[2], entry[3])

    def take(
        self, events: Sequence[JsonObject]
    ) -> tuple[list[T | None], list[Member | None], list[str | None]]:
        """What was prepared for each of `events` (in seq order), dropping anything older:
        their encodings, members and texts, None where nothing was."""
        ready = self._ready
        encoded: list[T | None] = []
        members: list[Member | None] = []
        texts: list[str | None] = []
        for event in events:
            seq = event["seq"]
            while ready and ready[0][0]["seq"] < seq:
                ready.popleft()
            if ready and ready[0][0] is event:
                entry = ready.popleft()
                encoded.append(entry[1])
                members.append(entry[2])
                texts.append(entry[3])
            else:
                encoded.append(None)
                members.append(None)
                texts.append(None)
        return encoded, members, texts

    def take_all(self, events: Sequence[JsonObject]) -> list[list[Any]] | None:
        """The entries of `events` when every one of them was prepared, in the order admitted
        with nothing between them (each delta's run then holds in the batch as admitted,
        except that the batch's first event starts one), dropping anything older; else None
        and only the older entries are dropped (`take` then takes what there is)."""
        ready = self._ready
        count = len(events)
        if not count:
            return None
        seq = events[0]["seq"]
        while ready and ready[0][0]["seq"] < seq:
            ready.popleft()
        if (
            len(ready) < count
            or ready[0][0] is not events[0]
            or ready[count - 1][0] is not events[-1]
        ):
            return None
        taken = list(starmap(ready.popleft, repeat((), count)))  # `count` pops, in C
        if all(map(is_, map(itemgetter(0), taken), events)):
            return taken
        ready.extendleft(reversed(taken))
        return None


#: What a write has for each event of its batch: encodings, packing members, texts of deltas.
Prepared = tuple[list[E | None], list[Member | None], list[str | None]]


def prepared(events: Sequence[JsonObject], ahead: Ahead[E] | None, *, pack: bool) -> Prepared[E]:
    """What `ahead` prepared for `events` (nothing without it), and, when `pack`, the packing
    member of each event that has neither: the one start of every backend's batch encoding."""
    if ahead is None:
        encoded: list[E | None] = [None] * len(events)
        members: list[Member | None] = [None] * len(events)
        texts: list[str | None] = [None] * len(events)
    else:
        encoded, members, texts = ahead.take(events)
    if pack:
        for index, ready in enumerate(encoded):
            if ready is None and members[index] is None:
                members[index] = member_of(events[index])
    return encoded, members, texts


#: A backend's synchronous live append (`Handoff.append_inline`): True once written durably
#: on the calling thread, False when it may not run there now (nothing was done).
AppendInline = Callable[[JsonObject, list[JsonObject], A], bool]


class Handoff(Generic[A]):
    """One live session's `LiveEncoder`: admits into its `Ahead` and hands it, per write, to
    the backend's own `append_batch` through `handoff` (keyed by session id), or to its
    synchronous `inline` append (`inline.WritesInline`)."""

    __slots__ = ("_ahead", "_backend", "_handoff", "_inline", "admit")

    def __init__(
        self,
        backend: PersistenceBackend,
        handoff: dict[str, A],
        ahead: A,
        inline: AppendInline[A],
    ) -> None:
        self._backend = backend
        self._handoff = handoff
        self._ahead = ahead
        self._inline = inline
        self.admit = ahead.admit

    def append_inline(self, meta: JsonObject, events: list[JsonObject]) -> bool:
        """Append a materialized session's `events` durably on the calling thread when the
        backend's inline gate allows it now (True); else do nothing (False)."""
        return self._inline(meta, events, self._ahead)

    def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> Awaitable[None]:
        """The backend's `append_batch`, with this session's prepared encodings handed over:
        its coroutine, which takes them from `handoff` as it starts (the caller awaits it at
        once; no coroutine of this one waits beside it: docs/performance.md)."""
        self._handoff[meta["id"]] = self._ahead
        return self._backend.append_batch(meta, events, is_materialized=is_materialized)
