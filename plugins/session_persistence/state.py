"""What the coordinator knows per session id: its queue, its storage entry and its live binding.

Each id has a FIFO queue (`FifoLock`): one operation at a time, in arrival order, and a failed
one does not block the next. `Entry` is what this process knows of an id's storage (header,
durable cursor, materialized or not); `Binding` is one live Session wired to the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .backend import JsonObject, LiveEncoder, SetAside
from .fifo import FifoLock, Ticket
from .session_api import LiveSession
from .writer import WriteController


@dataclass(frozen=True, slots=True)
class SessionLog:
    """A session as read: its header and its events (balanced unless said otherwise; a
    read-only sequence, compact for a stored log: docs/event-log.md).

    `torn_bytes`: bytes of a torn tail a repair will cut (inspect only; 0 after a repair).
    `set_aside`: what repairs cut from the log and kept beside it.
    """

    header: JsonObject
    events: Sequence[JsonObject]
    torn_bytes: int = 0
    set_aside: tuple[SetAside, ...] = ()


class SessionPreparation:
    """A stored session prepared for resumption: an unpublished `session` and its reservation.

    Publish the session through the session store (`session/created` binds it to this backend
    and appends what it added, its `session/end-seed`), or `release()` the reservation.
    """

    __slots__ = ("_release", "session")

    def __init__(self, session: Any, release: Callable[[], None]) -> None:
        self.session = session
        self._release = release

    def release(self) -> None:
        """Give the reservation up (no-op once published or released)."""
        self._release()


@dataclass(eq=False, slots=True)
class Entry:
    """What this process knows of one id's storage."""

    meta: JsonObject
    cursor: int = 0
    materialized: bool = False
    binding: Binding | None = None
    reserved: SessionPreparation | None = None


@dataclass(eq=False, slots=True)
class Binding:
    """One live Session wired to this backend."""

    session: LiveSession
    ready: anyio.Event
    controller: WriteController = field(init=False)
    #: Encodes its events ahead of their writes, when the backend does (`EncodesAhead`).
    encoder: LiveEncoder | None = None
    entry: Entry | None = None
    error: Exception | None = None
    detached: bool = False


class _Queue(FifoLock):
    """One id's queue, in its table's `queues` while anyone holds or waits for it: made per
    write of an idle id, so it carries its key and leaves the table when idle (`_idle`), with
    no callback object of its own (docs/performance.md)."""

    __slots__ = ("_id", "_queues")

    def __init__(self, queues: dict[str, _Queue], session_id: str) -> None:
        super().__init__()
        self._queues = queues
        self._id = session_id

    def _idle(self) -> None:
        del self._queues[self._id]


@dataclass(eq=False, slots=True)
class Retirement:
    done: anyio.Event = field(default_factory=anyio.Event)


class SessionTable:
    """Per-id queues, entries and retirements, shared by the coordinator's parts."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self.retiring: dict[str, Retirement] = {}
        #: What repairs by this process cut from each id's log and kept beside it.
        self.set_aside: dict[str, list[SetAside]] = {}
        self._queues: dict[str, _Queue] = {}

    def ticket(self, session_id: str) -> Ticket:
        """A place in `session_id`'s queue (`async with` it)."""
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _Queue(self._queues, session_id)
        return queue.ticket()

    def idle(self, session_id: str) -> bool:
        """Nothing holds or waits for `session_id`'s queue."""
        return session_id not in self._queues

    async def wait_retirement(self, session_id: str) -> None:
        """Wait until a retiring live session of `session_id` has been drained."""
        retirement = self.retiring.get(session_id)
        if retirement is not None:
            await retirement.done.wait()

    def kept(self, session_id: str, kept: SetAside | None) -> None:
        """Record what a repair of `session_id` set aside (None: nothing was cut)."""
        if kept is not None:
            self.set_aside.setdefault(session_id, []).append(kept)

    def live(self, session_id: str) -> Binding | None:
        """The live binding owning `session_id`, if any."""
        entry = self.entries.get(session_id)
        return None if entry is None else entry.binding
