"""Reserving a file's next blocks past its end (Linux `fallocate` with `KEEP_SIZE`), for the
engines' append-only files: a JSONL log, a SQLite WAL.

On ext4 an `fsync` of an append into blocks already allocated journals no block bitmap or group
descriptor (docs/performance.md, "Seventh round: blocks reserved ahead of a live log", "A
growing WAL's `fsync`"). `FALLOC_FL_KEEP_SIZE` leaves the file's size and bytes as they are:
readers see the same bytes, and blocks past the end are invisible; a same-size `ftruncate` (or
deleting the file) frees them again. Elsewhere, on file systems without it, with less than
`HEADROOM` times the reservation free, and in memory (tmpfs, ramfs: `fsync` writes nothing
there, and the reservation would hold memory), reserving does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Final

__all__ = ["HEADROOM", "keep_size_fallocate"]

#: Reserve only while the file system has this many times the reservation free: near a full
#: disk, blocks reserved past many live files' ends must not take the space another write
#: needs (an append that would have fit failing with `ENOSPC`).
HEADROOM: Final = 64
_KEEP_SIZE: Final = 0x01  # FALLOC_FL_KEEP_SIZE, linux/falloc.h
#: `statfs.f_type` of the file systems kept in memory: TMPFS_MAGIC, RAMFS_MAGIC (linux/magic.h).
_IN_MEMORY: Final = frozenset({0x01021994, 0x858458F6})
#: Room for `struct statfs` (120 bytes on 64-bit Linux); `f_type` is its first field, a long.
_STATFS_BYTES: Final = 256

_Call = Callable[[int, int, int, int], int]


def _libc() -> tuple[_Call, Callable[[int, ctypes.Array[ctypes.c_char]], int]] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = getattr(libc, "fallocate64", None) or libc.fallocate
        fstatfs = getattr(libc, "fstatfs64", None) or libc.fstatfs
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    fstatfs.argtypes = (ctypes.c_int, ctypes.c_char_p)
    fstatfs.restype = ctypes.c_int
    return fallocate, fstatfs


_LIBC: Final = _libc()
_FALLOCATE: Final = None if _LIBC is None else _LIBC[0]
_FSTATFS: Final = None if _LIBC is None else _LIBC[1]


def in_memory(fd: int) -> bool:
    """Whether `fd`'s file lives on tmpfs or ramfs (False when that cannot be told)."""
    if _FSTATFS is None:
        return False
    buffer = ctypes.create_string_buffer(_STATFS_BYTES)
    if _FSTATFS(fd, buffer) != 0:
        return False
    return ctypes.c_long.from_buffer(buffer).value in _IN_MEMORY


def keep_size_fallocate(fd: int, offset: int, length: int) -> bool:
    """Allocate `length` bytes of `fd` from `offset` without changing its size; False when
    nothing was reserved (not Linux, a file system without it or in memory, less than
    `HEADROOM` times `length` free, a full disk)."""
    if _FALLOCATE is None or in_memory(fd):
        return False
    free = os.fstatvfs(fd)
    if free.f_bavail * free.f_frsize < HEADROOM * length:
        return False
    return _FALLOCATE(fd, _KEEP_SIZE, offset, length) == 0
