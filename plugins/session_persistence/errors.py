"""Errors raised by the persistence seam and its backends."""

from __future__ import annotations


class SessionPersistenceError(RuntimeError):
    """Raised when a persistence operation is refused or fails."""


class SessionPersistenceCorruptionError(SessionPersistenceError):
    """Raised when committed storage fails validation (never silently truncated)."""


class SessionFormatUnsupportedError(SessionPersistenceError):
    """Raised when a stored log uses a format version or event type this build cannot read."""


class SessionLockedError(SessionPersistenceError):
    """Raised when another live writer (process) owns the session."""

    def __init__(self, session_id: str, pid: int | None, host: str | None) -> None:
        self.session_id = session_id
        self.pid = pid
        self.host = host
        pid_text = "unknown" if pid is None else str(pid)
        super().__init__(
            f'session "{session_id}" is locked by another writer '
            f"(pid {pid_text} on host {host or 'unknown'})"
        )


class StaleWriterError(SessionPersistenceError):
    """Raised when storage changed behind this process's back (another writer appended)."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f'session "{session_id}" changed on disk since this process last read it; '
            "reload it before writing"
        )


class WriterLockLostError(SessionLockedError):
    """Raised instead of a write when this process held the session's writer lock and another
    writer has taken it over since (or it was lost with its connection): stop, do not write."""

    def __init__(self, session_id: str, pid: int | None, host: str | None) -> None:
        super().__init__(session_id, pid, host)
        holder = "" if pid is None else f" (now pid {pid} on host {host or 'unknown'})"
        self.args = (
            f'session "{session_id}" lost its writer lock to another writer{holder}; this '
            "process no longer owns it and stops writing: reload the session to go on",
        )
