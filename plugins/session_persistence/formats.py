"""Which stored logs and events this build reads: the format refusals of the seam, in one place
(docs/persistence.md).

A log is readable when its header is format v0 with the requested id and every event type is
known (or marked ignorable); an append is refused for retired shapes.
"""

from __future__ import annotations

from typing import Any

from plugins.session.events import KNOWN_EVENT_TYPES
from plugins.session.jsonutil import dumps

from .backend import Location
from .errors import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)

JsonObject = dict[str, Any]


def js_text(value: object) -> str:
    """How a JavaScript template literal renders a JSON-ish value."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def refuse_retired(event: JsonObject) -> None:
    """Retired shapes an append may not write: `request/header-delta` and a `request/header`
    of reason "fallback"."""
    kind = event.get("type")
    if kind == "request/header-delta":
        raise SessionPersistenceError(
            f'event type "request/header-delta" (seq {js_text(event.get("seq"))}) is refused: '
            "it was retired; request/header replaces it"
        )
    if kind == "request/header":
        data = event.get("data")
        if isinstance(data, dict) and data.get("reason") == "fallback":
            raise SessionPersistenceError(
                f'event "request/header" (seq {js_text(event.get("seq"))}) reason "fallback" '
                "is retired and refused"
            )


def check_readable(session_id: str, meta: JsonObject, location: Location | None) -> None:
    """Identity and version refusals of a stored log's header (before any shape check)."""
    located = _located(location)
    if meta.get("id") != session_id:
        raise SessionPersistenceCorruptionError(
            f'stored session identity mismatch: requested "{session_id}", '
            f'header contains "{js_text(meta.get("id"))}"'
        )
    version = meta.get("version")
    if type(version) is int and version > 0:
        raise SessionFormatUnsupportedError(
            f'session "{session_id}" uses log format v{version}, but this harness reads only '
            "v0: the log was written by a newer harness — upgrade the harness to open it" + located
        )
    if type(version) is int and version < 0:
        raise SessionFormatUnsupportedError(
            f'session "{session_id}" uses log format v{version}, older than the supported '
            "v0, and this build ships no upgrade path for it" + located
        )


def refuse_unknown(session_id: str, event: JsonObject, location: Location | None) -> None:
    """The event-type refusal: a type this build does not know, not marked ignorable (checked
    on every plain event before any shape check; packed chunk rows hold known types only)."""
    kind = event.get("type")
    if kind not in KNOWN_EVENT_TYPES and event.get("ignorable") is not True:
        raise SessionFormatUnsupportedError(
            f'session "{session_id}" contains event type "{js_text(kind)}" '
            f"(seq {js_text(event.get('seq'))}) unknown to this harness and not marked "
            "ignorable; refusing to interpret the log — it was likely written by a "
            "newer harness" + _located(location)
        )


def _located(location: Location | None) -> str:
    return "" if location is None else f" (raw log: {location.path})"
