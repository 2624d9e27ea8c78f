"""The persistence errors: one class per outcome a program branches on, each with a stable `code`.

The messages are the binding texts; callers test the type (or `code`), never the message.
"""

from __future__ import annotations

from framework.errors import DshError


class SessionPersistenceError(DshError, RuntimeError):
    """A persistence operation was refused or failed."""

    code = "SESSION_STORAGE_FAILED"


class SessionNotFoundError(SessionPersistenceError):
    """Nothing is stored (or live) under the session id."""

    code = "SESSION_NOT_FOUND"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f'session "{session_id}" not found')


class SessionExistsError(SessionPersistenceError):
    """A create met a session this backend already tracks or stores."""

    code = "SESSION_ALREADY_EXISTS"


class SessionPersistenceCorruptionError(SessionPersistenceError):
    """Committed storage fails validation (never silently truncated)."""

    code = "SESSION_CORRUPT"


class SessionFormatUnsupportedError(SessionPersistenceError):
    """A stored log uses a format version or event type this build cannot read."""

    code = "SESSION_FORMAT_UNSUPPORTED"


class SessionLockedError(SessionPersistenceError):
    """Another live writer (process) owns the session."""

    code = "SESSION_LOCKED"

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
    """Storage changed behind this process's back (another writer appended)."""

    code = "SESSION_STALE_WRITER"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(
            f'session "{session_id}" changed on disk since this process last read it; '
            "reload it before writing"
        )


class WriterLockLostError(SessionLockedError):
    """Raised instead of a write when this process held the session's writer lock and another
    writer has taken it over since (or it was lost with its connection): stop, do not write."""

    code = "SESSION_LOCK_LOST"

    def __init__(self, session_id: str, pid: int | None, host: str | None) -> None:
        super().__init__(session_id, pid, host)
        holder = "" if pid is None else f" (now pid {pid} on host {host or 'unknown'})"
        self.args = (
            f'session "{session_id}" lost its writer lock to another writer{holder}; this '
            "process no longer owns it and stops writing: reload the session to go on",
        )
