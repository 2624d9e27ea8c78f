"""`dsh-session-persistence-sqlite`: every session log in one SQLite database (docs/backends.md).

Provides `sessionPersistence` backed by `SqliteBackend`: a STRICT schema (`application_id`
0x44534850, `user_version` 18), one row per event or packed chunk run, one `BEGIN IMMEDIATE`
transaction per durable batch, and a `session_locks` row per live writer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import Field, field_validator

from framework import Context
from plugins.session_persistence import Config as PersistenceConfig
from plugins.session_persistence import mount_persistence
from plugins.session_persistence.config import InlineWrites
from plugins.session_persistence.home import absolute_path

from .backend import SqliteBackend
from .database import APPLICATION_ID, SCHEMA_VERSION, JournalMode, default_path

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "Config",
    "JournalMode",
    "SqliteBackend",
    "aliases",
    "apply",
    "default_path",
    "inject",
    "name",
]

name = SqliteBackend.name
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-persistence-sqlite"]
inject = ["sessions"]


class Config(PersistenceConfig, InlineWrites):
    """`path` (default `$DSH_HOME/sessions.sqlite3`; `~` expanded), `journal_mode`,
    `busy_timeout_ms` and `inline_write_max_ms`, plus the common persistence fields."""

    #: The database file; absolute after `~` expansion. Unset: `$DSH_HOME/sessions.sqlite3`.
    path: str | None = None
    #: SQLite journal mode (`wal`, or a rollback journal: `delete`, `truncate`, `persist`).
    journal_mode: JournalMode = Field(default="wal", alias="journalMode")
    #: How long a write waits for another connection's lock, in ms.
    busy_timeout_ms: int = Field(default=5000, ge=0, le=2**31 - 1, alias="busyTimeoutMs")

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: str | None) -> str | None:
        if path is None:
            return None
        return absolute_path(path, "path")

    def backend(self) -> SqliteBackend:
        """A backend for this configuration."""
        return SqliteBackend(
            self.path if self.path is not None else default_path(),
            journal_mode=self.journal_mode,
            busy_timeout_ms=self.busy_timeout_ms,
            inline_write_max_ms=self.inline_write_max_ms,
        )


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Provide `sessionPersistence` over a `SqliteBackend`; the disposer drains and unlocks."""
    return await mount_persistence(ctx, config.backend(), config)
