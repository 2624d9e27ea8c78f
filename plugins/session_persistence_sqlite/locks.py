"""Single-writer exclusion through the `session_locks` table (docs/persistence.md).

A holder's row carries a token, its pid and host, and a heartbeat (wall-clock ms) that a
`Heartbeat` thread refreshes every 10 s while any lock is held. Another writer takes the row over
only when the holder is gone (`plugins.session_persistence.liveness`, docs/storage-safety.md):

- on this host, only when the holder's process is dead: its pid does not exist, is a zombie, or
  now names another process (the token records the holder's boot id and process start time, so
  a reboot or a reused pid frees the lock). A live holder keeps its lock however stale its
  heartbeat (a SIGSTOPped or swapping process is alive);
- a holder on another host, whose process cannot be seen, once its heartbeat is over 30 s old.

A writer that held a lock and finds another token (or none) in the row lost it: every write
checks, and raises `WriterLockLostError` instead of writing. All functions here run inside the
caller's transaction on the backend's connection.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from typing import Final

from plugins.session_persistence.backend import Owner
from plugins.session_persistence.errors import SessionLockedError, WriterLockLostError
from plugins.session_persistence.liveness import HOST, holder_alive_as, process_identity

__all__ = [
    "HEARTBEAT_S",
    "HOST",
    "STALE_MS",
    "Heartbeat",
    "check_lock",
    "holder_alive",
    "live_holder",
    "new_token",
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


#: `(pid, process_identity(pid))` of this process, read once per pid (a fork gets a new pid).
_own_identity: tuple[int, str | None] = (0, None)


def _identity() -> str | None:
    global _own_identity
    pid = os.getpid()
    if _own_identity[0] != pid:
        _own_identity = (pid, process_identity(pid))
    return _own_identity[1]


def new_token() -> str:
    """A fresh lock token: random, then `@` and this process's identity when known."""
    identity = _identity()
    token = uuid.uuid4().hex
    return token if identity is None else f"{token}@{identity}"


def holder_alive(pid: int, token: str) -> bool:
    """Whether the holder that wrote `token` on this host still runs (the seam's liveness rule,
    with the process identity the token recorded)."""
    return holder_alive_as(pid, token.partition("@")[2] or None)


def _stealable(row: tuple[str, int, str, int], host: str, stale_ms: int) -> bool:
    token, pid, holder_host, heartbeat_at = row
    if holder_host == host:
        return not holder_alive(pid, token)
    return now_ms() - heartbeat_at > stale_ms


def live_holder(connection: sqlite3.Connection, session_id: str, stale_ms: int) -> Owner | None:
    """The recorded holder of `session_id`'s lock while it may not be taken over, else None."""
    row = connection.execute(
        "SELECT token, pid, host, heartbeat_at FROM session_locks WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is None or _stealable(row, HOST, stale_ms):
        return None
    return Owner(row[1], row[2])


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
    acquire: bool = False,
    host: str = HOST,
    stale_ms: int = STALE_MS,
) -> None:
    """Inside a write transaction: let `token` write `session_id`, or raise.

    `acquire`: take the lock for `token` (a missing or stealable row is written, a live
    holder raises `SessionLockedError`). Otherwise `token` is held and the row must still carry
    it (else `WriterLockLostError`), or it is None: a one-off write that only needs no live
    holder.
    """
    row = connection.execute(
        "SELECT token, pid, host, heartbeat_at FROM session_locks WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is not None and row[0] == token:
        return
    if token is not None and not acquire:
        pid, holder = (None, None) if row is None else (row[1], row[2])
        raise WriterLockLostError(session_id, pid, holder)
    if row is not None and not _stealable(row, host, stale_ms):
        raise SessionLockedError(session_id, row[1], row[2])
    if token is not None:
        connection.execute(
            "INSERT OR REPLACE INTO session_locks (session_id, token, pid, host, heartbeat_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (session_id, token, os.getpid(), host, now_ms()),
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
