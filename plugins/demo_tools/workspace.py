"""A workspace folder the file tools are confined to (blocking I/O; callers use worker threads).

Paths are resolved beneath a descriptor of the workspace, one component at a time, each opened
with `O_NOFOLLOW` relative to its parent's descriptor (docs/security.md). A symbolic link is never
followed by the kernel: its target is read and resolved by the same walk, so a link (or a folder
swapped for one mid-call) can only lead to places inside the workspace; `..` pops the walk and
cannot climb above the workspace. `write_file` creates its temporary file in the final folder's
descriptor, renames it over the target within that descriptor and fsyncs the folder.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from typing import TypeVar

from plugins.llm import HarnessError

T = TypeVar("T")

MAX_SYMLINKS = 40
"""Links one path may expand through (the kernel's own limit) before it is refused."""

_RETRIES = 100
"""Times one component is looked at again when it changes between two checks."""

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class PathOutsideWorkspaceError(HarnessError):
    """A path that is absolute or resolves (`..`, symlinks) outside the workspace."""

    def __init__(self, path: str) -> None:
        super().__init__(f'path "{path}" is outside the workspace', "PATH_OUTSIDE_WORKSPACE")


class NotFoundError(HarnessError):
    """A workspace path that does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file not found: {path}", "NOT_FOUND")


class _Link(Exception):
    """The component looked at is a symbolic link to `target`."""

    def __init__(self, target: str) -> None:
        self.target = target


class _Changed(Exception):
    """The component changed between two looks (look again)."""


Leaf = Callable[[int, str | None], T]
"""Opens the last component `name` in the folder `dir_fd` (None: the path is that folder)."""


class Workspace:
    """Resolves model-supplied relative paths inside `root` and does the file operations."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._roots = {self.root, os.path.abspath(root)}

    def read(self, path: str, limit: int) -> str:
        """The file's text (UTF-8, undecodable bytes replaced), cut at `limit` bytes."""

        def leaf(dir_fd: int, name: str | None) -> bytes:
            if name is None:
                raise IsADirectoryError(f'path "{path}" is a directory')
            fd = _open(dir_fd, name, _READ, path)
            try:
                mode = os.fstat(fd).st_mode
                if stat.S_ISDIR(mode):
                    raise IsADirectoryError(f'path "{path}" is a directory')
                if not stat.S_ISREG(mode):
                    raise OSError(errno.EINVAL, f'path "{path}" is not a regular file')
                return _read(fd, limit + 1)
            finally:
                os.close(fd)

        data = self._walk(path, leaf)
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[truncated at {limit} bytes]"
        return text

    def list(self, path: str) -> list[str]:
        """Sorted entry names of a folder; folders end with `/` (a symlink is listed as itself)."""

        def leaf(dir_fd: int, name: str | None) -> list[str]:
            if name is None:
                return _names(dir_fd)
            not_dir = NotADirectoryError(f'path "{path}" is not a directory')
            fd = _open_dir(dir_fd, name, path, not_dir=not_dir)
            try:
                return _names(fd)
            finally:
                os.close(fd)

        return self._walk(path, leaf)

    def write(self, path: str, content: str) -> int:
        """Atomically replace the file with `content` (temp file, fsync, rename, fsync of the
        folder); missing folders are created. Returns the bytes written."""
        data = content.encode("utf-8")

        def leaf(dir_fd: int, name: str | None) -> int:
            if name is None:
                raise IsADirectoryError(f'path "{path}" is a directory')
            try:
                existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISLNK(existing.st_mode):
                raise _Link(os.readlink(name, dir_fd=dir_fd))
            if existing is not None and stat.S_ISDIR(existing.st_mode):
                raise IsADirectoryError(f'path "{path}" is a directory')
            mode = 0o644 if existing is None else existing.st_mode & 0o777
            _replace(dir_fd, name, data, mode)
            return len(data)

        os.makedirs(self.root, exist_ok=True)
        return self._walk(path, leaf, make_dirs=True)

    def _walk(self, path: str, leaf: Leaf[T], *, make_dirs: bool = False) -> T:
        """Resolve `path` beneath the root and return what `leaf` makes of its last component."""
        if os.path.isabs(path) or os.path.splitdrive(path)[0]:
            raise PathOutsideWorkspaceError(path)
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotFoundError(path) from None
        stack = [root]  # descriptors from the root down to the current folder
        todo = _components(path)  # reversed: the next component is last
        links = retries = 0
        try:
            while True:
                if not todo:
                    return leaf(stack[-1], None)
                part = todo.pop()
                if part == "..":
                    if len(stack) == 1:
                        raise PathOutsideWorkspaceError(path)
                    os.close(stack.pop())
                    continue
                try:
                    if todo:
                        stack.append(_open_dir(stack[-1], part, path, make=make_dirs))
                    else:
                        return leaf(stack[-1], part)
                except _Link as link:
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise OSError(
                            errno.ELOOP, f'path "{path}" has too many levels of symbolic links'
                        ) from None
                    todo.extend(_link_components(link.target, path, stack, self._roots))
                except _Changed:
                    retries += 1
                    if retries > _RETRIES:
                        raise OSError(errno.EAGAIN, f'path "{path}" kept changing') from None
                    todo.append(part)
        finally:
            for fd in stack:
                os.close(fd)


def _link_components(target: str, path: str, stack: list[int], roots: set[str]) -> list[str]:
    """The reversed components a link stands for; an absolute target inside the workspace
    (`roots`: its spellings) restarts the walk at the root, any other absolute target is
    outside."""
    if not os.path.isabs(target):
        return _components(target)
    for root in roots:
        if target == root or target.startswith(root.rstrip(os.sep) + os.sep):
            while len(stack) > 1:
                os.close(stack.pop())
            return _components(target[len(root) :])
    raise PathOutsideWorkspaceError(path)


def _components(path: str) -> list[str]:
    return [part for part in reversed(path.split(os.sep)) if part not in ("", ".")]


def _symlink(dir_fd: int, name: str) -> _Link | _Changed:
    """What to raise for `name` when opening it without following links failed."""
    try:
        return _Link(os.readlink(name, dir_fd=dir_fd))
    except OSError:
        return _Changed()


def _open_dir(
    dir_fd: int, name: str, path: str, *, make: bool = False, not_dir: Exception | None = None
) -> int:
    """A descriptor of the folder `name` in `dir_fd` (raises `_Link` for a link)."""
    try:
        return os.open(name, _DIRECTORY, dir_fd=dir_fd)
    except FileNotFoundError:
        if not make:
            raise NotFoundError(path) from None
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)
        except FileExistsError:
            pass
        raise _Changed() from None
    except NotADirectoryError:
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise _Changed() from None
        if stat.S_ISLNK(mode):
            raise _symlink(dir_fd, name) from None
        if stat.S_ISDIR(mode):
            raise _Changed() from None
        raise not_dir or NotFoundError(path) from None


def _open(dir_fd: int, name: str, flags: int, path: str) -> int:
    """`name` in `dir_fd` opened with `flags` (`O_NOFOLLOW`; raises `_Link` for a link)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise NotFoundError(path) from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _symlink(dir_fd, name) from None
        raise


def _read(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, size)):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _names(dir_fd: int) -> list[str]:
    with os.scandir(dir_fd) as entries:
        return sorted(
            entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "") for entry in entries
        )


def _replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write `data` to a new file in `dir_fd`, rename it over `name`, fsync the folder."""
    temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _CREATE, 0o600, dir_fd=dir_fd)
    pending = True
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        pending = False
        os.fsync(dir_fd)
    finally:
        if pending:
            os.unlink(temp, dir_fd=dir_fd)
