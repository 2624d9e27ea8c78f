"""Appends of data built for them: the agent loop's path past `Session.append`'s snapshot.

`Session.append` deep-copies and checks whatever it is handed, since the caller may hold the
payload, change it later or have filled it with values that are not lossless JSON. The agent
loop builds most of its events itself, from integers and from values already checked: the
snapshot of those is pure cost (docs/performance.md, "Owned appends in the agent loop").

Nothing here is exported by `plugins.session`: payloads that come from anywhere else (an app,
a plugin, a tool, a model adapter) go through `Session.append`. Foreign values inside an owned
payload are first passed through `checked`, which is `Session.append`'s snapshot.
"""

from __future__ import annotations

from typing import Any

from .events import Event
from .jsonutil import snapshot
from .session import Session, refused

__all__ = ["append_owned", "checked"]


def checked(event_type: str, value: Any) -> Any:
    """`value` as `Session.append` of a `event_type` event stores it: checked and
    deep-copied (the same `TypeError` when it is not lossless JSON)."""
    try:
        return snapshot(value)
    except TypeError as error:
        raise refused(event_type) from error


def append_owned(
    session: Session,
    event_type: str,
    data: Any,
    *,
    surface_op: str | dict[str, Any] | None = None,
    source_event_seqs: list[int] | None = None,
) -> Event:
    """`session.append(event_type, data, ...)` keeping `data` as it is (no copy, no JSON
    check); the envelope and surface checks still run.

    Only for a payload built for this one call, referenced by nothing the caller keeps and
    made only of JSON scalars and of values `checked` returned (or that are already in the log).
    """
    return session._commit(event_type, data, surface_op, source_event_seqs, False)
