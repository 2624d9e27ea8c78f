"""Whether the process that holds a writer lock is still there: one rule for every backend.

A holder is gone only when it ran on this host and its pid names no process, a zombie (a
process that exited but was not reaped holds nothing), or, when the holder recorded its process
identity (boot id and start time), another process that reused the pid or a pid from before a
reboot. A live process is never gone, however long it sleeps or stays stopped. A holder on
another host is never judged by pid (docs/persistence.md, docs/storage-safety.md).
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


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            return file.read().strip() or None
    except OSError:
        return None


def process_identity(pid: int) -> str | None:
    """`<boot id>/<start time in clock ticks since boot>` of process `pid` (immune to wall-clock
    changes), or None where /proc cannot tell."""
    boot = _boot_id()
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            start = file.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return None if boot is None else f"{boot}/{start}"


def holder_alive_as(pid: int, identity: str | None) -> bool:
    """Whether process `pid` on this host still runs and, when the holder recorded its
    `identity` (`process_identity` at the time), is still that process."""
    if not pid_alive(pid):
        return False
    if not identity:
        return True
    current = process_identity(pid)
    if current is None:
        return True
    return current == identity and identity.startswith(f"{_boot_id()}/")


def holder_gone(pid: object, host: object, identity: str | None = None) -> bool:
    """True when a recorded holder `(pid, host)` is a dead process on this host."""
    return host == HOST and type(pid) is int and not holder_alive_as(pid, identity)
