"""Single-writer exclusion through the `session_locks` table (spec 02 §6, §7).

A holder's row carries a random token, its pid and host, and a heartbeat (wall-clock ms) that a
`Heartbeat` thread refreshes every 10 s while any lock is held. Another writer takes the row over
only when the holder is gone (`plugins.session_persistence.liveness`: a dead or zombie pid on
this host) or its heartbeat is over 30 s old.
All functions here run inside the caller's transaction on the backend's connection.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Final

from plugins.session_persistence.backend import Owner
from plugins.session_persistence.errors import SessionLockedError
from plugins.session_persistence.liveness import HOST, holder_gone

__all__ = [
    "HEARTBEAT_S",
    "HOST",
    "STALE_MS",
    "Heartbeat",
    "check_lock",
    "live_holder",
    "now_ms",
]

#: How often a holder refreshes its heartbeat.
HEARTBEAT_S: Final = 10.0
#: A heartbeat older than this frees the lock.
STALE_MS: Final = 30_000

_log = logging.getLogger(__name__)


def now_ms() -> int:
    """Wall-clock milliseconds (heartbeats are compared across processes)."""
    return time.time_ns() // 1_000_000


def _stealable(pid: int, host: str, heartbeat_at: int, stale_ms: int) -> bool:
    return holder_gone(pid, host) or now_ms() - heartbeat_at > stale_ms


def live_holder(connection: sqlite3.Connection, session_id: str, stale_ms: int) -> Owner | None:
    """The recorded holder of `session_id`'s lock while it may not be taken over, else None."""
    row = connection.execute(
        "SELECT pid, host, heartbeat_at FROM session_locks WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None or _stealable(row[0], row[1], row[2], stale_ms):
        return None
    return Owner(row[0], row[1])


def recorded_holder(connection: sqlite3.Connection, session_id: str) -> Owner | None:
    """The holder `session_id`'s lock row records, live or not; None without a row."""
    row = connection.execute(
        "SELECT pid, host FROM session_locks WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else Owner(row[0], row[1])


def check_lock(
    connection: sqlite3.Connection,
    session_id: str,
    token: str | None,
    *,
    stale_ms: int = STALE_MS,
) -> None:
    """Inside a write transaction: let `token` (None for an unlocked one-off write) write
    `session_id`, or raise `SessionLockedError` naming the live holder.

    A held token whose row is missing or stealable is (re)written; a one-off write only needs
    no live holder.
    """
    row = connection.execute(
        "SELECT token, pid, host, heartbeat_at FROM session_locks WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is not None and row[0] == token:
        return
    if row is not None and not _stealable(row[1], row[2], row[3], stale_ms):
        raise SessionLockedError(session_id, row[1], row[2])
    if token is not None:
        connection.execute(
            "INSERT OR REPLACE INTO session_locks (session_id, token, pid, host, heartbeat_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (session_id, token, os.getpid(), HOST, now_ms()),
        )


class Heartbeat:
    """A daemon thread calling `beat()` every `interval` seconds until `stop()`."""

    def __init__(self, beat: Callable[[], None], interval: float = HEARTBEAT_S) -> None:
        self._beat = beat
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dsh-sqlite-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._beat()
            except Exception as error:  # a missed beat is retried at the next interval
                _log.warning("session-persistence-sqlite: lock heartbeat failed: %s", error)

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stopped.set()
        self._thread.join()
