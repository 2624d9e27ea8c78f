"""Noticing at once that the writer-lock connection dropped (docs/storage-safety.md).

The advisory locks of live sessions live and die with one dedicated connection. `LockWatch`
waits for that connection's socket to become readable while no command runs on it: the server
only speaks unasked when it ends the session (`pg_terminate_backend`, a restart, an idle
timeout) or the kernel reports the peer gone (TCP keepalive). Then it calls `check(conn)`,
which probes the connection and, when it is dead, re-takes or gives up the locks. The socket is
watched through a duplicate descriptor, so psycopg's own waiting on the original is untouched.
asyncio only, like the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

__all__ = ["LockWatch", "readable"]

_log = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[Any]


def readable(fd: int) -> bool:
    """Whether `fd` has data (or an end of file) to read right now."""
    ready, _, _ = select.select([fd], [], [], 0)
    return bool(ready)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class LockWatch:
    """A background asyncio task following the current lock connection (`follow`)."""

    def __init__(self, check: Callable[[Connection], Awaitable[None]]) -> None:
        self._check = check
        self._conn: Connection | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def follow(self, conn: Connection) -> None:
        """Watch `conn` from now on (starting the task on first use)."""
        self._conn = conn
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="dsh-postgres-lock-watch"
            )

    async def aclose(self) -> None:
        """Stop watching and wait for the task to end."""
        task, self._task = self._task, None
        self._conn = None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._changed.clear()
            conn = self._conn
            if conn is None or conn.closed:
                await self._changed.wait()
                continue
            fd = os.dup(conn.fileno())
            ready: asyncio.Future[None] = loop.create_future()
            changed: asyncio.Future[Any] = loop.create_task(self._changed.wait())
            loop.add_reader(fd, _resolve, ready)
            try:
                await asyncio.wait((ready, changed), return_when=asyncio.FIRST_COMPLETED)
            finally:
                loop.remove_reader(fd)
                os.close(fd)
                changed.cancel()
            if ready.done() and conn is self._conn:
                try:
                    await self._check(conn)
                except Exception as error:  # the next write re-checks; keep watching
                    _log.warning("session-persistence-postgres: lock watch failed: %s", error)
                    await asyncio.sleep(0.1)
