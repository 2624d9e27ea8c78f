"""Where a session's log lives: `<root>/<project>/<segment(id)>/session.jsonl[.zstd]`.

Both encoders walk UTF-16 code units: ASCII letters, digits and `. _ -` stay, any other unit (`~`
too) becomes `~` plus four uppercase hex digits, so every id and cwd maps to one safe name.

The layout refusals carry the original harness's texts (docs/legacy-logs.md).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Final

from plugins.session.jsonutil import dumps
from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)
from plugins.session_persistence.home import dsh_home

__all__ = [
    "LOCK_NAME",
    "NO_CWD",
    "default_root",
    "duplicate_id",
    "encoding_mismatch",
    "flat_layout",
    "log_name",
    "misplaced_log",
    "project_dir",
    "requested_id_mismatch",
    "segment",
    "unescape",
]

#: Project directory of sessions without a cwd.
NO_CWD: Final = "_no-cwd"
#: The writer lock file inside a session directory (never deleted).
LOCK_NAME: Final = "session.lock"

_MAX_SEGMENT: Final = 255
_HASHED_PREFIX: Final = 180
_MAX_SLUG: Final = 251
_PLAIN: Final = re.compile(r"[A-Za-z0-9._-]*")
_SEPARATOR_RUNS: Final = re.compile(r"[/\\:]+")
_KEEP: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _escape(text: str) -> str:
    """Escape every UTF-16 unit of `text` outside `A-Z a-z 0-9 . _ -` as `~XXXX`."""
    if _PLAIN.fullmatch(text):
        return text
    raw = text.encode("utf-16-be", "surrogatepass")
    out: list[str] = []
    for i in range(0, len(raw), 2):
        unit = raw[i] << 8 | raw[i + 1]
        out.append(chr(unit) if unit < 128 and unit in _KEEP else f"~{unit:04X}")
    return "".join(out)


_ESCAPED: Final = re.compile(r"~([0-9A-F]{4})")


def unescape(name: str) -> str:
    """The id a directory name stands for (best effort: a hashed long id keeps its name)."""
    if "~~" in name:
        return name
    if name in ("~002E", "~002E~002E"):
        return "." * (len(name) // 5)
    raw = bytearray()
    last = 0
    for match in _ESCAPED.finditer(name):
        raw += name[last : match.start()].encode("utf-16-be")
        raw += int(match.group(1), 16).to_bytes(2, "big")
        last = match.end()
    raw += name[last:].encode("utf-16-be")
    return raw.decode("utf-16-be", "surrogatepass")


def segment(session_id: str) -> str:
    """The directory name of a session id (injective, at most 255 characters)."""
    if session_id == "":
        raise ValueError("session id must not be empty")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    escaped = _escape(session_id)
    if len(escaped) <= _MAX_SEGMENT:
        return escaped
    digest = hashlib.sha256(session_id.encode("utf-16-be", "surrogatepass")).hexdigest()
    return f"{escaped[:_HASHED_PREFIX]}~~{digest}"


def project_dir(cwd: str | None) -> str:
    """The project directory name of a cwd (`--<slug>--`, or `_no-cwd`)."""
    if cwd is None:
        return NO_CWD
    parts = _SEPARATOR_RUNS.split(cwd)
    slug = "-".join(_escape(part) for part in parts).lstrip("-") or "root"
    return f"--{slug[:_MAX_SLUG]}--"


def log_name(compression: str) -> str:
    """The log file name for a compression mode (`"zstd"` or `"none"`)."""
    return "session.jsonl.zstd" if compression == "zstd" else "session.jsonl"


def default_root() -> Path:
    """`$DSH_HOME/sessions` (`DSH_HOME` as `plugins.session_persistence.home` resolves it)."""
    return dsh_home() / "sessions"


def flat_layout(path: str) -> SessionPersistenceError:
    """A log file directly in a project directory (the flat layout of older releases)."""
    return SessionPersistenceError(
        f"session artifact {dumps(path)} uses the unsupported flat-file layout; use a separate "
        "root or move it into a project/session directory before loading"
    )


def encoding_mismatch(path: str, compression: str) -> SessionPersistenceError:
    """A log `path` of the other encoding than the configured `compression`."""
    suffix = ".jsonl" if compression == "zstd" else ".jsonl.zstd"
    return SessionPersistenceError(
        f"session artifact {dumps(path)} uses {suffix}, but this backend is configured for "
        f"compression {dumps(compression)}; use a separate root or select the matching "
        "compression mode"
    )


def duplicate_id(session_id: str) -> SessionPersistenceError:
    """One session id stored under two project directories."""
    return SessionPersistenceError(
        f'duplicate JSONL session id "{session_id}" appears in multiple project directories'
    )


def requested_id_mismatch(path: str, requested: str, header_id: object) -> SessionPersistenceError:
    """The log found for `requested` names another id in its header."""
    return SessionPersistenceCorruptionError(
        f'corrupt session log {dumps(path)}: requested id "{requested}" does not match header '
        f'id "{header_id}"'
    )


def misplaced_log(path: str, header_id: str, expected: str | None) -> SessionPersistenceError:
    """A log whose header id and cwd name another path (`expected`; None: no path at all)."""
    if expected is None:
        return SessionPersistenceCorruptionError(
            f"corrupt session log {dumps(path)}: header id cannot name a storage path"
        )
    return SessionPersistenceCorruptionError(
        f'corrupt session log {dumps(path)}: header id "{header_id}" and cwd identify '
        f"{dumps(expected)}"
    )
