"""The one file-system rule every backend follows for what it keeps (docs/storage-safety.md).

Below a backend's root (the JSONL session root, the SQLite database's folder) no path component
may be a symbolic link, and every directory and file there, the root included, must be owned by
this user and not writable by group or others. Whatever a backend creates is 0700 (directories)
or 0600 (files) whatever the umask. A refusal is an `UnsafeStorageError` naming the path and the
command that fixes it. Before each durable write a backend also checks that the path it writes
still names the file it holds open (`check_same_file`).
"""

from __future__ import annotations

import os
import stat
from typing import Final

from .errors import SessionPersistenceError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "ReplacedFileError",
    "UnsafeStorageError",
    "check_dir",
    "check_file",
    "check_path",
    "check_same_file",
    "make_dir",
    "make_dirs",
    "open_file",
]

#: The mode of every directory a backend creates.
DIR_MODE: Final = 0o700
#: The mode of every file a backend creates.
FILE_MODE: Final = 0o600

_LOOSE: Final = 0o022
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC


class ReplacedFileError(SessionPersistenceError):
    """Raised before a write when a held file's path no longer names it (moved, copied back)."""

    code = "STORAGE_FILE_REPLACED"

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f'session storage "{path}" was replaced while this process held it open (the path '
            "now names another file or none); refusing to write to the old one: reload the "
            "session"
        )


class UnsafeStorageError(SessionPersistenceError):
    """Raised when a stored path is a symbolic link, of the wrong kind, owned by another user, or
    writable by group or others."""

    code = "UNSAFE_STORAGE"

    def __init__(self, path: str, problem: str, fix: str) -> None:
        self.path = path
        super().__init__(f'session storage "{path}" {problem}; {fix}')


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


def _check(path: str, st: os.stat_result, *, directory: bool) -> None:
    """The rule for one already-`lstat`ed path."""
    kind = "directory" if directory else "file"
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStorageError(
            path,
            "is a symbolic link; refusing to follow it",
            f"replace it with a real {kind} (links are never followed below the storage root)",
        )
    if directory and not stat.S_ISDIR(st.st_mode):
        raise UnsafeStorageError(path, "is not a directory", "move it out of the way")
    if not directory and not stat.S_ISREG(st.st_mode):
        raise UnsafeStorageError(path, "is not a regular file", "move it out of the way")
    uid = os.geteuid()
    if st.st_uid != uid:
        raise UnsafeStorageError(
            path,
            f"is owned by uid {st.st_uid}, not by this user (uid {uid})",
            f"check it, then take it over: chown {uid} {_quote(path)}",
        )
    if st.st_mode & _LOOSE:
        mode = DIR_MODE if directory else FILE_MODE
        raise UnsafeStorageError(
            path,
            f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})",
            f"make it private: chmod {mode:o} {_quote(path)}",
        )


def check_dir(path: str, st: os.stat_result | None = None) -> None:
    """Refuse `path` unless it is a real directory of this user that only it may write.

    `st` is its `lstat` result when the caller has one (a directory entry's, say)."""
    _check(path, os.lstat(path) if st is None else st, directory=True)


def check_file(path: str, st: os.stat_result | None = None) -> None:
    """Refuse `path` unless it is a regular file of this user that only it may write."""
    _check(path, os.lstat(path) if st is None else st, directory=False)


def check_path(root: str, path: str, *, leaf_is_dir: bool = False) -> bool:
    """Check `root` (which may itself be reached through links) and every component of `path`
    below it; False as soon as a component does not exist (nothing more to check)."""
    try:
        check_dir(root, os.stat(root))
    except FileNotFoundError:
        return False
    relative = os.path.relpath(path, root)
    if relative.startswith(os.pardir) or os.path.isabs(relative):
        raise ValueError(f'"{path}" is not below the storage root "{root}"')
    parts = [] if relative == os.curdir else relative.split(os.sep)
    current = root
    for index, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return False
        _check(current, st, directory=leaf_is_dir or index < len(parts) - 1)
    return True


def check_same_file(path: str, held: os.stat_result) -> None:
    """Raise `ReplacedFileError` unless `path` still names the file `held` is the `fstat` of
    (same device and inode)."""
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        raise ReplacedFileError(path) from None
    if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
        raise ReplacedFileError(path)


def make_dir(path: str) -> None:
    """Create one directory 0700 whatever the umask (raises `FileExistsError` if it exists)."""
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE, follow_symlinks=False)


def missing_dirs(path: str) -> list[str]:
    """`path` and those of its parents that do not exist, outermost first."""
    missing: list[str] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return missing[::-1]


def make_dirs(path: str) -> None:
    """Create `path` and its missing parents, each 0700 whatever the umask."""
    for directory in missing_dirs(path):
        try:
            make_dir(directory)
        except FileExistsError:
            continue


def open_file(path: str, flags: int, *, create: bool = True) -> int:
    """Open a stored file without following a link: created 0600 (whatever the umask) when
    missing and `create`, else checked by the rule. `flags` are the access flags."""
    flags &= ~(os.O_CREAT | os.O_EXCL)
    if create:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
        except FileExistsError:
            pass
        else:
            os.fchmod(fd, FILE_MODE)
            return fd
    try:
        fd = os.open(path, flags | _NOFOLLOW)
    except OSError:
        if os.path.islink(path):
            check_file(path)  # raises: a symbolic link
        raise
    try:
        check_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd
