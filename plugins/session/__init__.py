"""Sessions (plugin `dsh-session`, service `sessions`): the JSON codec, the event model, the
append-only `Session`, the `SessionStore`, crash repair and message derivation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .events import (
    KNOWN_EVENT_TYPES,
    SURFACE_TYPES,
    Event,
    EventFormatError,
    Surface,
    UnknownEventTypeError,
    UnsupportedVersionError,
    validate_header,
    validate_log,
)
from .messages import derive_messages
from .repair import interrupted_turn_closers
from .session import Session, now_ms
from .store import SessionForkError, SessionStore

if TYPE_CHECKING:
    from framework import Context

__all__ = [
    "KNOWN_EVENT_TYPES",
    "SURFACE_TYPES",
    "Event",
    "EventFormatError",
    "Session",
    "SessionForkError",
    "SessionStore",
    "Surface",
    "UnknownEventTypeError",
    "UnsupportedVersionError",
    "aliases",
    "apply",
    "derive_messages",
    "interrupted_turn_closers",
    "name",
    "now_ms",
    "validate_header",
    "validate_log",
]

name = "session"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session"]


def apply(ctx: Context, config: object) -> Callable[[], None]:
    """Provide the `sessions` service; on dispose, detach the sessions still live."""
    store = SessionStore(ctx, config)
    ctx.provide(SessionStore.provide, store)
    return store.close
