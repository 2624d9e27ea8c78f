"""How `dsh` writes a stored time."""

from __future__ import annotations

import time


def stamp(ms: int) -> str:
    """Local `YYYY-MM-DD HH:MM:SS` of an epoch-ms time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
