"""The write controller of one live session: batching window, drains and group commit.

See docs/persistence.md. Events arrive from the synchronous `session/event` listener
(`enqueue`, O(1)); a timer armed by the first buffered event starts one background write when the
window closes; a `flush` drains everything buffered, and flushes arriving during a drain join it
instead of writing on their own, so k concurrent flushes cost one `append_batch` (one fsync /
transaction).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator

import anyio
import anyio.lowlevel

from .backend import JsonObject
from .runnable import others_runnable
from .timers import Timers, Window

logger = logging.getLogger("plugins.session_persistence")

#: Writes one batch durably (the coordinator's queued, shielded `append_batch`).
WriteBatch = Callable[[list[JsonObject]], Awaitable[None]]
#: Writes one batch durably right now, without suspending, when nothing stands in the way (the
#: coordinator's inline write): True once written, False when it did nothing.
WriteNow = Callable[[list[JsonObject]], bool]


class _Latch:
    """Set once; its `anyio.Event` is made only if someone waits (a lone flush never does)."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._set = False

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if not self._set:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


class _Done:
    """An awaitable that is already done: what `flush` returns when it has nothing to wait for."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield


#: What `flush` returns when it had nothing to wait for (or wrote at once): awaitable, and
#: recognisable, so that `session/flush` can tell the store there is nothing to await.
DONE = _Done()


class _Drain(_Latch):
    """One drain in progress, set once it is over; flushes that arrive meanwhile wait for its
    outcome."""

    __slots__ = ("error", "finished")

    def __init__(self) -> None:
        super().__init__()
        self.error: Exception | None = None
        self.finished = False


class WriteController:
    """Buffers one live session's events and writes them in batches."""

    def __init__(
        self,
        *,
        label: str,
        write: WriteBatch,
        ready: anyio.Event,
        timers: Timers,
        admit: Callable[[JsonObject], None] | None = None,
        write_now: WriteNow | None = None,
    ) -> None:
        #: `<backend>: background write for session "<id>"`, the warning's prefix.
        self._label = label
        self._write = write
        self._ready = ready
        self._timers = timers
        #: Prepares each event for its write as it is admitted (`backend.LiveEncoder.admit`).
        self._admit = admit
        #: Tried before `write` for each batch (see `WriteNow`).
        self._write_now = write_now
        #: Events admitted but not yet durable, in seq order.
        self.pending: list[JsonObject] = []
        self._timer: Window | None = None
        self._paused = False
        self._drain: _Drain | None = None
        #: A write is in flight (`_write_once`); `_written` is made only when someone waits
        #: for it (`_wait_written`), most writes have nobody.
        self._writing = False
        self._written: _Latch | None = None

    # -- admission (hot path) -------------------------------------------------------------------

    def enqueue(self, event: JsonObject) -> None:
        """Buffer `event`; arm the window if it is the first (the deadline is never extended)."""
        if self._admit is not None:
            self._admit(event)
        self.pending.append(event)
        if self._drain is not None:
            return
        if self._paused:
            self._paused = False
            self._arm()
        elif self._timer is None:
            self._arm()

    def prepend(self, events: list[JsonObject]) -> None:
        """Put `events` (older than anything buffered) in front of the queue."""
        if events:
            self.pending[:0] = events
            if self._timer is None and self._drain is None:
                self._arm()

    @property
    def idle(self) -> bool:
        """No write and no drain in progress."""
        return not self._writing and self._drain is None

    # -- timer ----------------------------------------------------------------------------------

    def _arm(self) -> None:
        self._timer = self._timers.arm(self._fire)

    def cancel_timer(self) -> None:
        """Disarm the window (a flush or teardown takes over)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _fire(self, window: Window) -> None:
        if self._timer is not window:
            return
        self._timer = None
        await self._background_write()

    async def _background_write(self) -> None:
        """The deadline's write: queued behind an in-flight one; a failure pauses and warns."""
        if not self._ready.is_set():
            await self._ready.wait()
        if self._writing:
            await self._wait_written()
        if self._drain is not None or self._paused or not self.pending:
            return
        try:
            await self._write_once()
        except Exception as error:
            logger.warning("%s failed (buffered events retained): %s", self._label, error)

    # -- writing --------------------------------------------------------------------------------

    def _write_at_once(self) -> bool:
        """Write the whole queue through `write_now` (True), or leave it queued (False); on
        failure put it back in front, pause and raise."""
        if self._write_now is None:
            return False
        batch = self.pending
        self.pending = []
        try:
            written = self._write_now(batch)
        except Exception:
            self.pending[:0] = batch
            self._paused = True
            raise
        if not written:
            self.pending[:0] = batch
        return written

    async def _write_once(self) -> None:
        """Write the whole queue as one batch; on failure put it back in front and pause."""
        if self._write_at_once():
            return
        batch = self.pending
        self.pending = []
        self._writing = True
        try:
            await self._write(batch)
        except Exception:
            self.pending[:0] = batch
            self._paused = True
            raise
        except BaseException:
            # Cancelled before the write began (writes themselves are shielded): the window
            # writes the batch later unless a flush comes first.
            self.pending[:0] = batch
            if self._timer is None:
                self._arm()
            raise
        finally:
            self._writing = False
            written, self._written = self._written, None
            if written is not None:
                written.set()

    def _wait_written(self) -> Awaitable[None]:
        """Wait for the write in flight (only while `_writing`)."""
        if self._written is None:
            self._written = _Latch()
        return self._written.wait()

    def flush(self) -> Awaitable[None]:
        """Return once every event admitted before (or during) this call is durable. Only
        once the binding is ready (`LiveSessions.flush` waits for that first).

        Nothing pending and nothing in flight: no I/O. A flush arriving during a drain joins it.
        A failed write raises here; its batch stays queued, in order, for a later flush.

        A plain function returning what to await (the drain itself, in the common case), so a
        waiting flush holds no coroutine of its own (docs/performance.md); it suspends only
        where the awaitable it returns does.
        """
        self.cancel_timer()
        self._paused = False
        if self._drain is not None or self._writing:
            return self._join()
        if not self.pending or (not others_runnable() and self._write_at_once()):
            # Nothing to write, or a lone flush nobody could join written at once: the drain's
            # whole work without its bookkeeping (docs/performance.md).
            return DONE
        return self._run_drain()

    async def _join(self) -> None:
        """Wait for the drain in progress, or start one once the write in flight is done."""
        while True:
            drain = self._drain
            if drain is None:
                if not self.pending and not self._writing:
                    return
                await self._run_drain()
                return
            await drain.wait()
            if drain.error is not None:
                raise drain.error
            if drain.finished:
                return
            # The drain's starter was cancelled before it finished: carry on in its place.

    async def _run_drain(self) -> None:
        drain = _Drain()
        self._drain = drain
        try:
            if self._writing:
                await self._wait_written()
            # Let flushers that are already scheduled (a step's parallel tool calls) append
            # their events and join before the batch is cut: one write serves them all. With
            # no other task ready the pass would only come back here (docs/performance.md).
            if others_runnable():
                await anyio.lowlevel.checkpoint()
            while self.pending:
                await self._write_once()
            drain.finished = True
        except Exception as error:
            drain.error = error
            raise
        finally:
            self._drain = None
            drain.set()
