"""Whether the process that holds a writer lock is still there: one rule for every backend.

A holder is gone only when it ran on this host and its pid names no process, or a zombie (a
process that exited but was not reaped holds nothing). A holder on another host is never judged
by pid (docs/persistence.md).
"""

from __future__ import annotations

import os
import socket
from typing import Final

#: This machine's name, as lock holders record it.
HOST: Final = socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in (b"Z", b"X")


def holder_gone(pid: object, host: object) -> bool:
    """True when a recorded holder `(pid, host)` is a dead process on this host."""
    return host == HOST and type(pid) is int and not pid_alive(pid)
