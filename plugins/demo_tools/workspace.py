"""A workspace folder the file tools are confined to (blocking I/O; callers use worker threads)."""

from __future__ import annotations

import os
import tempfile

from plugins.llm import HarnessError


class PathOutsideWorkspaceError(HarnessError):
    """A path that is absolute or resolves (`..`, symlinks) outside the workspace."""

    def __init__(self, path: str) -> None:
        super().__init__(f'path "{path}" is outside the workspace', "PATH_OUTSIDE_WORKSPACE")


class NotFoundError(HarnessError):
    """A workspace path that does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file not found: {path}", "NOT_FOUND")


class Workspace:
    """Resolves model-supplied relative paths inside `root` and does the file operations."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def resolve(self, path: str) -> str:
        """The real path of `path`; refuses absolute paths and anything resolving outside."""
        if os.path.isabs(path) or os.path.splitdrive(path)[0]:
            raise PathOutsideWorkspaceError(path)
        real = os.path.realpath(os.path.join(self.root, path))
        if real != self.root and not real.startswith(self.root.rstrip(os.sep) + os.sep):
            raise PathOutsideWorkspaceError(path)
        return real

    def read(self, path: str, limit: int) -> str:
        """The file's text (UTF-8, undecodable bytes replaced), cut at `limit` bytes."""
        real = self.resolve(path)
        if os.path.isdir(real):
            raise IsADirectoryError(f'path "{path}" is a directory')
        try:
            with open(real, "rb") as file:
                data = file.read(limit + 1)
        except FileNotFoundError:
            raise NotFoundError(path) from None
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[truncated at {limit} bytes]"
        return text

    def list(self, path: str) -> list[str]:
        """Sorted entry names of a folder; folders end with `/`."""
        real = self.resolve(path)
        if not os.path.exists(real):
            raise NotFoundError(path)
        if not os.path.isdir(real):
            raise NotADirectoryError(f'path "{path}" is not a directory')
        with os.scandir(real) as entries:
            return sorted(entry.name + ("/" if entry.is_dir() else "") for entry in entries)

    def write(self, path: str, content: str) -> int:
        """Atomically replace the file with `content` (temp file, fsync, rename); bytes written."""
        real = self.resolve(path)
        if real == self.root or os.path.isdir(real):
            raise IsADirectoryError(f'path "{path}" is a directory')
        data = content.encode("utf-8")
        folder = os.path.dirname(real)
        os.makedirs(folder, exist_ok=True)
        mode = os.stat(real).st_mode & 0o777 if os.path.exists(real) else 0o644
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(real)}.", suffix=".tmp")
        pending: str | None = temp
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temp, mode)
            os.replace(temp, real)
            pending = None
        finally:
            if pending is not None:
                os.unlink(pending)
        return len(data)
