"""The booted app's session store, for every command that reads or writes stored sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plugins.session_persistence import SessionNotFoundError

from .errors import SESSION_NOT_FOUND, USAGE, CliError

if TYPE_CHECKING:
    from framework import Context
    from plugins.session_persistence import SessionPersistenceService

#: What a command that only reads (or deletes) stored sessions boots of the manifest.
STORE_ONLY = ("sessionPersistence",)


def persistence_of(ctx: Context) -> SessionPersistenceService:
    """The manifest's `sessionPersistence`, or a usage error."""
    service = ctx.get("sessionPersistence")
    if service is None:
        raise CliError("the manifest mounts no session persistence backend", USAGE)
    return service  # type: ignore[no-any-return]


async def stored_events(ctx: Context, session_id: str) -> list[dict[str, Any]] | None:
    """The stored events of `session_id` (None when nothing is stored or nothing persists)."""
    service = ctx.get("sessionPersistence")
    if service is None:
        return None
    try:
        events: list[dict[str, Any]] = await service.read_from(session_id, 0)
    except SessionNotFoundError:
        return None
    return events


def not_found(session_id: str | None) -> CliError:
    """`session "<id>" not found` (exit 1)."""
    return CliError(f'session "{session_id}" not found', code=SESSION_NOT_FOUND)
