"""An append-only JSONL ledger keyed by idempotency key (blocking I/O; run in worker threads).

Each line is `{"key", "entry", "at"}` (`at` = epoch milliseconds). Appends take a process-local
lock and an exclusive `flock` on the file, so duplicate keys are refused across threads and
processes; every append is fsynced before it is reported.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from plugins.session.jsonutil import dumps, loads

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the in-process lock alone
    fcntl = None  # type: ignore[assignment]


class Ledger:
    """The ledger file at `path` (created, with its folder, on first append)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[IO[str]]:
        mode = "a+" if exclusive else "r"
        with self._lock, open(self.path, mode, encoding="utf-8", opener=_owner_only) as file:
            if fcntl is not None:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            file.seek(0)
            yield file

    @staticmethod
    def _scan(lines: Iterable[str], key: str) -> dict[str, Any] | None:
        for line in lines:
            try:
                record = loads(line)
            except ValueError:
                continue  # a torn last line from a crash
            if isinstance(record, dict) and record.get("key") == key:
                return record
        return None

    def append(self, key: str, entry: Any) -> dict[str, Any]:
        """Append `entry` under `key` unless the key is present; `{"status", "key"}`."""
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        with self._locked(exclusive=True) as file:
            text = file.read()
            if self._scan(text.splitlines(), key) is not None:
                return {"status": "duplicate", "key": key}
            record = {"key": key, "entry": entry, "at": int(time.time() * 1000)}
            prefix = "\n" if text and not text.endswith("\n") else ""
            file.write(prefix + dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())
            if not text and folder:
                _fsync_dir(folder)
        return {"status": "appended", "key": key}

    def find(self, key: str) -> dict[str, Any] | None:
        """The record stored under `key`, or None."""
        try:
            with self._locked(exclusive=False) as file:
                return self._scan(file, key)
        except FileNotFoundError:
            return None


def _owner_only(path: str, flags: int) -> int:
    """Create the ledger 0600, like the session files beside it."""
    return os.open(path, flags, 0o600)


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
