"""Disk blocks reserved for the write-ahead log, so that a commit's `fsync` does not allocate
them (docs/performance.md, "A growing WAL's `fsync`").

SQLite's WAL grows by each commit's frames until its first checkpoint restarts it; on ext4 the
`fdatasync` of a commit that allocates blocks costs more than one that overwrites blocks the
file already has. `fallocate(FALLOC_FL_KEEP_SIZE)` reserves the blocks of a WAL of
`wal_autocheckpoint` pages past the file's end without changing a byte or its size; SQLite's own
delete (when the last connection closes) or truncation frees them. The commit and its `fsync` are
unchanged: this only saves the allocation, not the journalled size change. Where the call is
missing or refused (not Linux, a file system without it or in memory, a full disk) nothing
is reserved (`plugins/session_persistence/reserve.py`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Final

from plugins.session_persistence import fsguard
from plugins.session_persistence.reserve import keep_size_fallocate

__all__ = ["reserve_wal", "wal_bytes"]

#: The WAL's header and each frame's header (sqlite.org/fileformat.html, "WAL File Format").
_WAL_HEADER: Final = 32
_FRAME_HEADER: Final = 24


def wal_bytes(connection: sqlite3.Connection) -> int:
    """The size of a WAL holding `wal_autocheckpoint` frames of this database's pages."""
    (page_size,) = connection.execute("PRAGMA page_size").fetchone()
    (pages,) = connection.execute("PRAGMA wal_autocheckpoint").fetchone()
    return int(_WAL_HEADER + max(pages, 0) * (page_size + _FRAME_HEADER))


def reserve_wal(connection: sqlite3.Connection, path: str) -> bool:
    """Reserve the blocks of `path`'s WAL (`<path>-wal`, opened by the storage rule, never
    created) up to `wal_bytes`; True when they were reserved."""
    length = wal_bytes(connection)
    try:
        fd = fsguard.open_file(f"{path}-wal", os.O_RDWR, create=False)
    except FileNotFoundError:
        return False
    try:
        return keep_size_fallocate(fd, 0, length)
    finally:
        os.close(fd)
