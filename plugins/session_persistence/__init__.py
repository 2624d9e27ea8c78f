"""The persistence seam: the `sessionPersistence` service, its write coordinator, the backend
Protocol and base class, the storage rules every backend reads with, the error classes and (in
`testing`) the fakes, builders, reference backend and contract suite.

A library, not a plugin: each backend package (`session_persistence_jsonl`, `_sqlite`,
`_postgres`) is the plugin and mounts the service with `mount_persistence`.
"""

from .backend import JsonObject, Location, Owner, PersistenceBackend, SetAside, Snapshot, StoredLog
from .base import BackendBase
from .config import Config
from .errors import (
    SessionExistsError,
    SessionFormatUnsupportedError,
    SessionLockedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    StaleWriterError,
)
from .service import SessionPersistenceService, mount_persistence
from .state import SessionLog, SessionPreparation
from .timers import Clock, SystemClock

__all__ = [
    "BackendBase",
    "Clock",
    "Config",
    "JsonObject",
    "Location",
    "Owner",
    "PersistenceBackend",
    "SessionExistsError",
    "SessionFormatUnsupportedError",
    "SessionLockedError",
    "SessionLog",
    "SessionNotFoundError",
    "SessionPersistenceCorruptionError",
    "SessionPersistenceError",
    "SessionPersistenceService",
    "SessionPreparation",
    "SetAside",
    "Snapshot",
    "StaleWriterError",
    "StoredLog",
    "SystemClock",
    "mount_persistence",
]
