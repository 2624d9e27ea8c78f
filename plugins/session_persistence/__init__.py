"""The persistence seam: the `sessionPersistence` service, its write coordinator, the backend
Protocol, the error classes and (in `testing`) the reusable backend contract suite.

A library, not a plugin: each backend package (`session_persistence_jsonl`, `_sqlite`,
`_postgres`) is the plugin and mounts the service with `mount_persistence`.
"""

from .backend import JsonObject, Location, PersistenceBackend, Snapshot, StoredLog
from .config import Config
from .coordinator import SessionLog, SessionPreparation
from .errors import (
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    StaleWriterError,
)
from .service import SessionPersistenceService, mount_persistence
from .timers import Clock, SystemClock

__all__ = [
    "Clock",
    "Config",
    "JsonObject",
    "Location",
    "PersistenceBackend",
    "SessionFormatUnsupportedError",
    "SessionLockedError",
    "SessionLog",
    "SessionPersistenceCorruptionError",
    "SessionPersistenceError",
    "SessionPersistenceService",
    "SessionPreparation",
    "Snapshot",
    "StaleWriterError",
    "StoredLog",
    "SystemClock",
    "mount_persistence",
]
