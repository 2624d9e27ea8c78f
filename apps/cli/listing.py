"""`dsh sessions`: one summary row per stored session, newest first."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plugins.session_persistence import Owner, SessionPersistenceError, SessionPersistenceService
from plugins.tool_approval import pending_questions

from .summary import last_turn_reason, turn_count


@dataclass(frozen=True)
class SessionRow:
    """A stored session at a glance; `size` in bytes where the backend keeps one file per
    session; `problem` when the log cannot be read; `running` when another process is running
    it now (its counts are what that process made durable so far)."""

    id: str
    created_at: int
    cwd: str | None
    turns: int = 0
    last_reason: dict[str, Any] | None = None
    events: int = 0
    size: int | None = None
    problem: str | None = None
    running: Owner | None = None
    #: Approval questions the session waits on (answered with `dsh approve` / `dsh deny`).
    waiting: int = 0

    def to_json(self) -> dict[str, Any]:
        """The `--json` line."""
        line: dict[str, Any] = {
            "id": self.id,
            "createdAt": self.created_at,
            "cwd": self.cwd,
            "turns": self.turns,
            "lastReason": self.last_reason,
            "events": self.events,
            "size": self.size,
            "waitingApprovals": self.waiting,
        }
        if self.problem is not None:
            line["problem"] = self.problem
        if self.running is not None:
            line["running"] = {"pid": self.running.pid, "host": self.running.host}
        return line


def running_text(owner: Owner) -> str:
    """E.g. `running (pid 4242 on host box)`."""
    pid = "unknown" if owner.pid is None else str(owner.pid)
    return f"running (pid {pid} on host {owner.host or 'unknown'})"


def _size(persistence: SessionPersistenceService, header: dict[str, Any]) -> int | None:
    location = persistence.locate(header)
    if location is None or location.kind != "file":
        return None
    try:
        return os.stat(location.path).st_size
    except OSError:
        return None


async def session_rows(
    persistence: SessionPersistenceService,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> list[SessionRow]:
    """Summaries of every stored session, newest first, read with the non-mutating inspect.

    `progress(total)` returns the callback advanced once per session.
    """
    headers = await persistence.list()
    advance = progress(len(headers)) if progress is not None else None
    rows = []
    for header in sorted(headers, key=lambda h: (h["createdAt"], h["id"]), reverse=True):
        base = {"id": header["id"], "created_at": header["createdAt"], "cwd": header.get("cwd")}
        if "problem" in header:  # a stored entry the backend refuses (docs/storage-safety.md)
            rows.append(SessionRow(**base, problem=str(header["problem"])))
            if advance is not None:
                advance()
            continue
        try:
            owner = await persistence.owner(header["id"])
            events = (
                await persistence.read_from(header["id"], 0)
                if owner is not None
                else (await persistence.inspect(header["id"])).events
            )
        except SessionPersistenceError as error:
            rows.append(SessionRow(**base, problem=str(error)))
        else:
            rows.append(
                SessionRow(
                    **base,
                    turns=turn_count(events),
                    last_reason=None if owner is not None else last_turn_reason(events),
                    events=len(events),
                    size=_size(persistence, header),
                    running=owner,
                    waiting=len(pending_questions(events)),
                )
            )
        if advance is not None:
            advance()
    return rows
