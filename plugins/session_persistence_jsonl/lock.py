"""The cross-process writer lock of one session directory (docs/backends.md).

`session.lock` (0600, never deleted) is held with `fcntl.flock(LOCK_EX | LOCK_NB)` on a kept file
descriptor, so the kernel frees it when the holder dies. The holder records who it is as one JSON
line, which a refused writer reads to name the owner.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence import fsguard
from plugins.session_persistence.backend import Owner
from plugins.session_persistence.errors import SessionLockedError, SessionPersistenceError

__all__ = ["LockTable", "WriterLock", "lock_holder", "lock_table"]


class WriterLock:
    """A held lock on one session's `session.lock`; `release()` frees it."""

    __slots__ = ("_fd", "_held", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._held = os.fstat(fd)

    @classmethod
    def acquire(cls, session_id: str, path: str) -> WriterLock:
        """Take the lock without waiting; raise `SessionLockedError` naming the holder."""
        try:
            fd = fsguard.open_file(path, os.O_RDWR)
        except fsguard.UnsafeStorageError:
            raise
        except OSError as error:
            raise SessionPersistenceError(
                f'cannot open the writer lock of session "{session_id}" at "{path}": {error}'
            ) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, host = _holder(fd)
            os.close(fd)
            raise SessionLockedError(session_id, pid, host) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            now_ms = time.time_ns() // 1_000_000
            record = dumps({"pid": os.getpid(), "host": socket.gethostname(), "acquiredAt": now_ms})
            os.ftruncate(fd, 0)
            os.pwrite(fd, (record + "\n").encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def check(self) -> None:
        """Raise `ReplacedFileError` when the lock's path no longer names the held file (a
        second writer would lock the new one)."""
        fsguard.check_same_file(self.path, self._held)

    def release(self) -> None:
        """Free the lock (closing the descriptor releases the flock); idempotent."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def _holder(fd: int) -> tuple[int | None, str | None]:
    """The pid and host a holder recorded, or None for what cannot be read."""
    try:
        info: Any = loads(os.pread(fd, 4096, 0).split(b"\n", 1)[0])
    except (OSError, ValueError):
        return None, None
    if type(info) is not dict:
        return None, None
    pid = info.get("pid")
    host = info.get("host")
    return (pid if type(pid) is int else None), (host if type(host) is str else None)


def lock_holder(path: str, table: LockTable | None = None) -> Owner | None:
    """Who holds the lock at `path` now (read from its record), or None when it is free; takes
    nothing. `/proc/locks` answers without touching the lock (`table`: read once for many
    probes, else now); where it cannot be read, a shared non-blocking probe does (a writer
    starting in that instant sees the probe as a holder)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise SessionPersistenceError(f'cannot read the writer lock at "{path}": {error}') from None
    try:
        held = (table or lock_table()).held
        if held is not None:
            is_held = _file_key(os.fstat(fd)) in held
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                is_held = True
            else:
                is_held = False
                fcntl.flock(fd, fcntl.LOCK_UN)
        if not is_held:
            return None
        pid, host = _holder(fd)
        return Owner(pid, host)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class LockTable:
    """The files `/proc/locks` listed an exclusive flock holder on (as `maj:min:inode`), or
    None when it could not be read."""

    held: frozenset[str] | None


def lock_table() -> LockTable:
    """`/proc/locks` now; its waiters (`->`) are not holders."""
    try:
        with open("/proc/locks", "rb") as file:
            text = file.read().decode("ascii", "replace")
    except OSError:
        return LockTable(None)
    held = set()
    for line in text.splitlines():
        if "FLOCK" not in line or "->" in line:
            continue
        fields = line.split()
        if len(fields) >= 6 and fields[1:4:2] == ["FLOCK", "WRITE"]:
            held.add(fields[5])
    return LockTable(frozenset(held))


def _file_key(st: os.stat_result) -> str:
    """`st`'s file as `/proc/locks` names it."""
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
