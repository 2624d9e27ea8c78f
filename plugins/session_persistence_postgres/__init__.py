"""`dsh-session-persistence-postgres`: session logs in PostgreSQL (docs/backends.md), asyncio only.

Provides `sessionPersistence` backed by `PostgresBackend`: a session row and one row per event
in schema `schema`, writes as one transaction each, live writers excluded by advisory locks.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pydantic import Field

from plugins.session_persistence.config import Config as PersistenceConfig
from plugins.session_persistence.service import mount_persistence

from .backend import PostgresBackend
from .connection import ASYNCIO_REQUIRED, DatabaseError, lock_key
from .schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from framework import Context

__all__ = [
    "ASYNCIO_REQUIRED",
    "SCHEMA_VERSION",
    "Config",
    "DatabaseError",
    "PostgresBackend",
    "aliases",
    "apply",
    "inject",
    "lock_key",
    "name",
]

name = PostgresBackend.name
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-persistence-postgres"]
inject = ["sessions"]


class Config(PersistenceConfig):
    """`dsn`, `schema` and `pool_max_size`, plus the common persistence fields."""

    #: libpq connection string or URI. Unset: `$DSH_POSTGRES_DSN`; empty: libpq's environment.
    dsn: str | None = None
    #: The PostgreSQL schema holding the tables (created if absent).
    db_schema: str = Field(default="dsh", alias="schema", min_length=1, max_length=63)
    #: Upper bound of pooled connections (the lock connection is extra).
    pool_max_size: int = Field(default=10, ge=1, alias="poolMaxSize")

    def backend(self) -> PostgresBackend:
        """A backend for this configuration (refused outside asyncio)."""
        return PostgresBackend(
            os.environ.get("DSH_POSTGRES_DSN", "") if self.dsn is None else self.dsn,
            schema=self.db_schema,
            pool_max_size=self.pool_max_size,
        )


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Connect (clear errors for an unreachable server or bad credentials), then provide
    `sessionPersistence`."""
    backend = config.backend()
    try:
        await backend.open()
    except BaseException:
        await backend.aclose()
        raise
    return await mount_persistence(ctx, backend, config)
