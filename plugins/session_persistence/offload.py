"""A long-lived I/O thread per backend: blocking storage calls off the event loop, cheaply.

`anyio.to_thread.run_sync` costs a capacity-limiter round trip and extra loop passes on every
call; on a small VM that hand-off costs about as much as the `fsync` it carries. `IoThread` keeps
one daemon thread that takes calls from a queue and wakes the waiting task directly on its own
loop (asyncio or trio), in submission order. The wait is shielded: a cancelled caller still waits
for its call to finish, so a write is never abandoned half-way (docs/performance.md).

With `overflow=True` a call that arrives while the thread is busy runs in an anyio worker thread
instead, so independent calls (the files of many sessions) still run in parallel.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import anyio.to_thread
import sniffio

T = TypeVar("T")

#: Seconds an idle thread waits for work before it exits (the next call starts a new one).
IDLE_SECONDS = 30.0


def _waker() -> Callable[[Callable[[], object]], object]:
    """A thread-safe "run this soon on the current loop" for the running async library."""
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    return asyncio.get_running_loop().call_soon_threadsafe


class _Call(Generic[T]):
    __slots__ = ("done", "error", "fn", "result", "wake")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = anyio.Event()
        self.wake = _waker()
        self.result: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as error:
            self.error = error
        self.wake(self.done.set)


class IoThread:
    """Runs blocking calls, one at a time and in order, on one long-lived thread."""

    def __init__(self, name: str, *, overflow: bool = False) -> None:
        self._name = name
        self._overflow = overflow
        self._jobs: queue.SimpleQueue[_Call[Any]] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Calls submitted to the thread and not yet finished.
        self._queued = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` off the loop; its result or its exception."""
        if self._overflow and self._queued:
            return await anyio.to_thread.run_sync(partial(fn, *args))
        call: _Call[T] = _Call(partial(fn, *args))
        with self._guard:
            self._queued += 1
            self._jobs.put(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
        with anyio.CancelScope(shield=True):
            await call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def _serve(self) -> None:
        while True:
            try:
                call = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._guard:
                    if self._jobs.empty():
                        self._thread = None
                        return
                continue
            call.run()
            with self._guard:
                self._queued -= 1
