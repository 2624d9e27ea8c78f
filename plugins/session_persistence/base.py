"""What every backend shares: the header list, the raw-artifact refusal and `async with`.

A backend subclasses `BackendBase` and implements the engine part of `PersistenceBackend`.
"""

from __future__ import annotations

import builtins
from types import TracebackType
from typing import Self

from .backend import JsonObject, Snapshot
from .errors import SessionPersistenceError

#: The refusal of a backend whose storage is not one artifact per session.
NO_RAW_ARTIFACTS = "this session persistence backend does not expose raw artifacts"


class BackendBase:
    """Defaults for a `PersistenceBackend`: `list` from `list_snapshots`, `read_raw` refused,
    and `async with backend:` closing it."""

    name: str = "session-persistence"

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        raise NotImplementedError

    async def list(self) -> builtins.list[JsonObject]:
        """Headers of every materialized session, by `(createdAt, id)`."""
        return [snapshot.header for snapshot in await self.list_snapshots()]

    async def read_raw(self, session_id: str) -> bytes:
        """Refused unless the backend keeps one artifact per session."""
        raise SessionPersistenceError(NO_RAW_ARTIFACTS)

    async def aclose(self) -> None:
        """Release every lock and resource."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
