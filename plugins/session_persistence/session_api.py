"""What the coordinator needs of a live Session (`plugins.session.Session` satisfies it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .backend import JsonObject


class LiveSession(Protocol):
    """A session as the persistence seam sees it: id, header and its events so far."""

    @property
    def id(self) -> str: ...

    @property
    def header(self) -> JsonObject: ...

    @property
    def events(self) -> Sequence[JsonObject]: ...


#: Builds an unpublished Session from a stored header and balanced events (it validates them and
#: appends `session/end-seed`).
SessionFactory = Callable[[JsonObject, Sequence[JsonObject]], Any]
