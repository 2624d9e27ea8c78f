"""Where the harness keeps its files: `$DSH_HOME` (default `~/.dsh`), always absolute.

Every backend takes its default location from `dsh_home()` and checks a configured path with
`absolute_path`, so a relative `DSH_HOME` or path is refused the same way everywhere
(docs/persistence.md).
"""

from __future__ import annotations

import os
from pathlib import Path


def dsh_home() -> Path:
    """`$DSH_HOME` with `~` expanded, or `~/.dsh` when unset or empty; never the cwd.

    Raises `ValueError` for a relative `DSH_HOME`.
    """
    home = os.environ.get("DSH_HOME") or ""
    base = Path(home).expanduser() if home else Path.home() / ".dsh"
    if not base.is_absolute():
        raise ValueError(f"DSH_HOME must be an absolute path, got {home!r}")
    return base


def absolute_path(value: str, field: str) -> str:
    """`value` with `~` expanded; `ValueError` naming `field` unless the result is absolute."""
    expanded = os.path.expanduser(value)
    if not os.path.isabs(expanded):
        raise ValueError(f"{field} must be an absolute path (or start with ~), got {value!r}")
    return expanded
