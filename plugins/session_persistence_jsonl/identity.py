"""The JSONL store's identity: 32 random hex digits in `<root>/store-id` (0600), created once.

Creation writes a private temp file and links it into place, so concurrent first uses agree on
one id. The file follows the storage rule of `fsguard` (no link, owned by this user, not
writable by group or others); malformed content is refused.
Blocking I/O: the backend runs it in a worker thread.
"""

from __future__ import annotations

import errno
import os
import secrets
import uuid
from typing import Final

from plugins.session_persistence import fsguard
from plugins.session_persistence.errors import (
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)

from .fileops import FileOps

__all__ = ["STORE_ID_NAME", "read_or_create_store_id"]

#: The file in the root holding the store's identity.
STORE_ID_NAME: Final = "store-id"


def read_or_create_store_id(root: str, io: FileOps) -> str:
    """The id in `<root>/store-id`, creating the root (0700) and the file when missing."""
    path = os.path.join(root, STORE_ID_NAME)
    found = _read(path)
    if found is not None:
        return found
    _make_root(root, io)
    temp = f"{path}.{secrets.token_hex(6)}.tmp"
    fd = io.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
    os.fchmod(fd, fsguard.FILE_MODE)  # whatever the umask left
    try:
        try:
            io.write_all(fd, f"{uuid.uuid4().hex}\n".encode())
            io.fsync(fd)
        finally:
            io.close(fd)
        try:
            io.link(temp, path)
        except FileExistsError:
            pass  # another process created it first: its id is the store's
        else:
            io.fsync_dir(root)
    finally:
        try:
            io.unlink(temp)
        except OSError:
            pass
    found = _read(path)
    if found is None:
        raise SessionPersistenceError(f'store identity file "{path}" vanished after creation')
    return found


def _make_root(root: str, io: FileOps) -> None:
    """Create the missing folders of `root` (0700), fsyncing each parent."""
    for folder in fsguard.missing_dirs(root):
        try:
            io.mkdir(folder)
        except FileExistsError:
            continue
        io.fsync_dir(os.path.dirname(folder))


def _read(path: str) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            fsguard.check_file(path)  # raises: a symbolic link
        raise SessionPersistenceError(
            f'cannot read store identity file "{path}": {error}'
        ) from None
    try:
        fsguard.check_file(path, os.fstat(fd))  # the storage rule (docs/storage-safety.md)
        data = os.read(fd, 256)
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").strip()
    if len(text) != 32 or any(c not in "0123456789abcdef" for c in text):
        raise SessionPersistenceCorruptionError(f'store identity file "{path}" is malformed')
    return text
