"""`Session`: an append-only event log with its model-visible surface (docs/event-log.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from framework import FrameworkError

from .eventlog import EventLog, plain_events
from .events import Event, Surface, check_appended, check_event, live_event, validate_header
from .jsonutil import snapshot
from .messages import message_of

if TYPE_CHECKING:
    from framework import Context

__all__ = ["Clock", "Publisher", "Session", "now_ms"]

logger = logging.getLogger("plugins.session")

Clock = Callable[[], int]
Publisher = Callable[["Session", Event], None]
"""Hands one appended event to whoever listens (the session store, while it holds the session
published); it must not raise."""

_REPLACE_KEYS = ("op", "start", "end")


def now_ms() -> int:
    """Wall-clock time in integer epoch milliseconds."""
    return time.time_ns() // 1_000_000


class Session:
    """A session: `id`, `header`, `events` (a read-only `EventLog` of dicts in on-disk key
    order; a loaded log's stored part decodes on read, docs/event-log.md), the next `seq`, and
    `first_live_seq` (the first seq after the seed and its `session/end-seed`).

    `append` is synchronous and does no I/O. Once the session store has published the session,
    every append is handed to the `session/event` listeners (the persistence seam among them),
    through the publisher the store hands it (`publish_to`).
    """

    __slots__ = (
        "_clock",
        "_publisher",
        "_publishing",
        "events",
        "first_live_seq",
        "header",
        "surface",
    )

    def __init__(
        self,
        header: Mapping[str, Any],
        seed: Iterable[Any] | None = None,
        *,
        clock: Clock = now_ms,
    ) -> None:
        """Validate `header` and the `seed` events (contiguous from seq 0, checked like appends,
        deep-copied). A seed (even an empty one) that does not end with `session/end-seed` gets
        one appended; `seed=None` starts an empty, unseeded session."""
        self.header: dict[str, Any] = dict(header)
        validate_header(self.header)
        self.events = EventLog()
        self.surface = Surface()
        self._clock = clock
        self._publisher: Publisher | None = None
        self._publishing = False
        self.first_live_seq = 0
        if seed is not None:
            for raw in seed:
                try:
                    event = snapshot(raw)
                except TypeError as error:
                    kind = raw.get("type") if isinstance(raw, dict) else None
                    raise refused(str(kind)) from error
                self._check(event, len(self.events))
                self.events._push(event)
                self.surface.apply(event)
            self._end_seed()

    def _end_seed(self) -> None:
        """Close the seed with a `session/end-seed` unless it ends with one."""
        if not self.events or self.events[-1]["type"] != "session/end-seed":
            self.events._push(live_event("session/end-seed", len(self.events), self._clock(), {}))
        self.first_live_seq = len(self.events)

    @classmethod
    def from_stored(cls, header: Mapping[str, Any], events: Sequence[Event]) -> Session:
        """An unpublished session over a stored (balanced) log: events are validated like a
        seed but neither copied nor decoded into a list (a compact log stays compact), and a
        `session/end-seed` is appended unless the log already ends with one."""
        session = cls(header)
        log = session.events = EventLog(events)
        surface = session.surface
        for seq, event in plain_events(log):
            check_event(event, seq)
            surface.check(event, log)
            surface.apply(event)
        session._end_seed()
        return session

    @property
    def id(self) -> str:
        """The session id (`header["id"]`)."""
        session_id: str = self.header["id"]
        return session_id

    @property
    def seq(self) -> int:
        """The seq the next appended event gets (= number of events)."""
        return len(self.events)

    def __repr__(self) -> str:
        return f"<Session {self.id!r} events={len(self.events)}>"

    def publish_to(self, publisher: Publisher | None) -> None:
        """From now on hand every append to `publisher` (None: to no one)."""
        self._publisher = publisher

    def messages(self) -> list[dict[str, Any]]:
        """The model-visible transcript, from the tracked surface (same as `derive_messages`)."""
        return [message_of(self.events[seq]) for seq in self.surface.nodes]

    def _check(self, event: Event, seq: int) -> None:
        check_event(event, seq)
        self.surface.check(event, self.events)

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: str | dict[str, Any] | None = None,
        source_event_seqs: list[int] | None = None,
        ignorable: bool = False,
    ) -> Event:
        """Append one event (seq = number of events, time = the clock) and publish it to the
        `session/event` listeners; the push is the commit point. Returns the event."""
        try:
            data = snapshot(data)
            if surface_op is not None:
                surface_op = snapshot(surface_op)
            if source_event_seqs is not None:
                source_event_seqs = snapshot(source_event_seqs)
        except TypeError as error:
            raise refused(type) from error
        return self._commit(type, data, surface_op, source_event_seqs, ignorable)

    def _commit(
        self,
        type: str,
        data: Any,
        surface_op: str | dict[str, Any] | None,
        source_event_seqs: list[int] | None,
        ignorable: bool,
    ) -> Event:
        """Append what `append` checked and copied (or `owned.append_owned` was handed)."""
        if self._publishing:
            raise RuntimeError(
                "session append cannot reenter while another append is being published"
            )
        if surface_op is not None:
            surface_op = _canonical_op(surface_op)
        events = self.events
        seq = len(events)
        event = live_event(
            type,
            seq,
            self._clock(),
            data,
            ignorable=ignorable,
            source_event_seqs=source_event_seqs,
            surface_op=surface_op,
        )
        check_appended(event)
        if surface_op is None:
            # No surface operation: the surface neither checks nor records anything.
            events._push(event)
        else:
            self.surface.check(event, events)
            events._push(event)
            self.surface.apply(event)
        publisher = self._publisher
        if publisher is not None:
            self._publishing = True
            try:
                publisher(self, event)
            finally:
                self._publishing = False
        return event


def refused(event_type: str) -> TypeError:
    """The error of an append whose data is not lossless JSON (raised from the snapshot's)."""
    return TypeError(f'session event "{event_type}" carries non-JSON-serializable data')


def _canonical_op(op: Any) -> Any:
    """A replace op in its on-disk key order `{"op","start","end"}` (other shapes unchanged;
    validation refuses them)."""
    if type(op) is not dict:
        return op
    return {key: op[key] for key in _REPLACE_KEYS if key in op} | op


def _background(ctx: Context, awaitable: Any, session_id: str, what: str) -> None:
    """Await `awaitable` as a background task of `ctx` (the store's own context), logging
    `session "<id>": <what>: <e>`; an inactive context drops it with an error logged."""

    async def run() -> None:
        try:
            await awaitable
        except Exception as error:
            logger.error('session "%s": %s: %s', session_id, what, error)

    try:
        ctx.spawn(run)
    except FrameworkError as error:
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()
        logger.error('session "%s": %s: cannot await it: %s', session_id, what, error)
