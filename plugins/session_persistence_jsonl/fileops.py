"""The OS calls the JSONL write path makes, behind one small replaceable object.

`FileOps` is the fault-injection seam: tests subclass it to make `write`, `fsync`, `ftruncate`
or `link` fail like a full or broken disk (ENOSPC, EIO) and check that the engine rolls back,
or `reserve` find a file system without `fallocate`.
"""

from __future__ import annotations

import errno
import os

from plugins.session_persistence import fsguard
from plugins.session_persistence.reserve import keep_size_fallocate

__all__ = ["FileOps"]


class FileOps:
    """Thin wrappers over `os`; every method may raise `OSError`."""

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        """`os.open` (the caller adds `O_NOFOLLOW`/`O_CLOEXEC`)."""
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        """`os.close`."""
        os.close(fd)

    def write(self, fd: int, data: memoryview) -> int:
        """One `os.write`; returns the count written (may be short)."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        """`os.fsync`."""
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        """`os.ftruncate`."""
        os.ftruncate(fd, length)

    def reserve(self, fd: int, offset: int, length: int) -> bool:
        """Allocate blocks past the end without changing the size (`reserve`); False when
        nothing was reserved. Never raises: the write that follows reports a full disk."""
        return keep_size_fallocate(fd, offset, length)

    def size(self, fd: int) -> int:
        """The current size of an open file: where it ends (one `lseek`, no `fstat`)."""
        return os.lseek(fd, 0, os.SEEK_END)

    def mkdir(self, path: str) -> None:
        """Create one owner-only directory (0700 regardless of the umask)."""
        fsguard.make_dir(path)

    def link(self, source: str, target: str) -> None:
        """`os.link` (raises `FileExistsError` when `target` exists)."""
        os.link(source, target)

    def unlink(self, path: str) -> None:
        """`os.unlink`."""
        os.unlink(path)

    def write_all(self, fd: int, data: bytes) -> None:
        """Write every byte of `data`, looping over short writes."""
        view = memoryview(data)
        while view:
            written = self.write(fd, view)
            if written <= 0:
                raise OSError(errno.EIO, "write made no progress")
            view = view[written:]

    def fsync_dir(self, path: str) -> None:
        """Make a directory's entries durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self.fsync(fd)
        finally:
            os.close(fd)
