"""Reserving a live log's next blocks past its end (Linux `fallocate` with `KEEP_SIZE`).

A log whose next blocks are already allocated costs its `fsync` less than one that grows into
new blocks (docs/performance.md, "Reserved blocks ahead of a live log"). `FALLOC_FL_KEEP_SIZE`
leaves the file's size and bytes as they are: readers see the same log, and blocks past the
end are invisible; a same-size `ftruncate` frees them again. Elsewhere, and on file systems
without it, reserving does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Final

__all__ = ["RESERVE_BYTES", "keep_size_fallocate"]

#: How far ahead of a live log's end its writer reserves, once per this many bytes appended.
RESERVE_BYTES: Final = 2 << 20
_KEEP_SIZE: Final = 0x01  # FALLOC_FL_KEEP_SIZE, linux/falloc.h


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    return call


_FALLOCATE: Final = _libc_fallocate()


def keep_size_fallocate(fd: int, offset: int, length: int) -> bool:
    """Allocate `length` bytes of `fd` from `offset` without changing its size; False when
    nothing was reserved (not Linux, a file system without it, a full disk, ...)."""
    return _FALLOCATE is not None and _FALLOCATE(fd, _KEEP_SIZE, offset, length) == 0
