"""The events the session store dispatches (docs/writing-plugins.md, "Events").

The store dispatches them itself, from listener snapshots: `CREATED` synchronously (a raise
vetoes the creation), `EVENT` from `Session.append` (failures logged), `FLUSH` concurrently
from `flush` (the first failure in registration order re-raised), `DISPOSED` once (contained).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework import Emit, Parallel

if TYPE_CHECKING:
    from .events import Event
    from .session import Session

__all__ = ["CREATED", "DISPOSED", "EVENT", "FLUSH"]

CREATED: Emit[Session] = Emit("session/created")
"""`(session)`: a session was published."""

EVENT: Emit[Session, Event] = Emit("session/event")
"""`(session, event)`: an event was appended (the persistence seam listens)."""

FLUSH: Parallel[Session] = Parallel("session/flush")
"""`(session)`: make everything appended so far durable; awaited by `sessions.flush`."""

DISPOSED: Emit[Session] = Emit("session/disposed")
"""`(session)`: the session was detached from the store."""
