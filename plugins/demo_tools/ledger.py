"""An append-only JSONL ledger keyed by idempotency key, and its two tools.

Each line is `{"key", "entry", "at"}` (`at` = epoch milliseconds). Appends take a process-local
lock and an exclusive `flock` on the file, so duplicate keys are refused across threads and
processes; every append is fsynced before it is reported. The file I/O blocks: the tools run it
in worker threads. `append_ledger` keys on `exec.idempotency_key`, the same for one durable call
across crash, repair and resume and different for any other call of any session or store.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import anyio.to_thread

from plugins.session.jsonutil import dumps, loads
from plugins.tools import Tool, ToolExecution, idempotency_key

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


def ledger_tools(ledger: Ledger) -> list[Tool]:
    """`append_ledger {entry}` and `find_ledger_entry {key}` over `ledger`."""

    async def append_ledger(args: dict[str, Any], exec: ToolExecution) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(ledger.append, exec.idempotency_key, args["entry"])

    async def find_ledger_entry(args: dict[str, Any], exec: ToolExecution) -> Any:
        key = args["key"]
        record = await anyio.to_thread.run_sync(ledger.find, key)
        if record is None and exec.agent is not None:
            # Not a key: maybe the id of a call of this session; look up that call's key.
            sessions = exec.agent.ctx.get("sessions")
            if sessions is not None:
                derived = idempotency_key(await sessions.identity(), exec.agent.session.id, key)
                record = await anyio.to_thread.run_sync(ledger.find, derived)
        return record

    return [
        Tool(
            name="append_ledger",
            description=(
                "Append an entry to the ledger exactly once per tool call: the call's "
                "idempotency key (stable across a crash and resume, unique across sessions) is "
                'the ledger key, so a repeated call reports {"status": "duplicate"}.'
            ),
            parameters=_object({"entry": {"description": "Any JSON value to record."}}, ["entry"]),
            execute=append_ledger,
        ),
        Tool(
            name="find_ledger_entry",
            description=(
                "Look up a ledger record by the key an append_ledger result reported, or by the "
                "tool call id of an append_ledger call of this session (e.g. one whose outcome "
                "is unknown after a crash); null if absent."
            ),
            parameters=_object({"key": {"type": "string"}}, ["key"]),
            execute=find_ledger_entry,
            read_only=True,
        ),
    ]


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _owner_only(path: str, flags: int) -> int:
    """Create the ledger 0600, like the session files beside it."""
    return os.open(path, flags, 0o600)


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
