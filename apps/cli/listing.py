"""`dsh sessions`: one summary row per stored session, newest first."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plugins.session_persistence import (
    Owner,
    SessionLog,
    SessionPersistenceError,
    SessionPersistenceService,
)

from .clock import stamp
from .states import STATES, State, glance
from .summary import reason_text

if TYPE_CHECKING:
    from .console import Consoles

#: The table's columns; those in `RIGHT` are right-aligned.
COLUMNS = ("id", "created", "turns", "last turn", "events", "size", "state", "title")
RIGHT = frozenset({"turns", "events", "size"})
#: Between two columns.
GAP = "  "
#: Sessions whose owners are probed together (JSONL: one read of the kernel's lock table),
#: just before their logs are read (docs/performance.md, P11).
PROBE_BATCH = 64


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
    title: str | None = None
    state: State | None = None
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
            "title": self.title,
            "state": self.state,
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
    *,
    limit: int | None = None,
    states: Collection[State] = STATES,
) -> list[SessionRow]:
    """Summaries of the stored sessions, newest first, read with the non-mutating inspect:
    at most `limit` of them, only those in `states` (a log that cannot be read is listed only
    when no state is asked for).

    `progress(total)` returns the callback advanced once per session read.
    """
    headers = sorted(await persistence.list(), key=lambda h: (h["createdAt"], h["id"]))
    headers.reverse()
    every = set(states) >= set(STATES)
    if every and limit is not None:
        headers = headers[:limit]
    advance = progress(len(headers)) if progress is not None else None
    rows: list[SessionRow] = []
    for start in range(0, len(headers), PROBE_BATCH):
        batch = headers[start : start + PROBE_BATCH]
        owners = await persistence.owners([h["id"] for h in batch if "problem" not in h])
        idle = [i for i in (h["id"] for h in batch) if i in owners and owners[i] is None]
        reads = _Reads(persistence, idle)
        for header in batch:
            if limit is not None and len(rows) >= limit:
                return rows
            row = await _row(persistence, header, owners, reads)
            if every or row.state in states:
                rows.append(row)
            if advance is not None:
                advance()
    return rows


class _Reads:
    """The balanced logs of a batch's sessions that no other process runs, read as they are
    asked for, as many at a time as the store reads in one call (`inspect_batch`): after the
    batch's owner probe, as that probe's rows are."""

    def __init__(self, persistence: SessionPersistenceService, session_ids: list[str]) -> None:
        self._persistence = persistence
        self._ids = session_ids
        self._read: dict[str, SessionLog | Exception] = {}

    async def inspect(self, session_id: str) -> SessionLog:
        """`inspect(session_id)`, raising what it raises."""
        if session_id not in self._ids:
            return await self._persistence.inspect(session_id)
        if session_id not in self._read:
            del self._ids[: self._ids.index(session_id)]
            found = await self._persistence.inspect_batch(self._ids)
            self._read = dict(zip(self._ids, found, strict=False))
        log = self._read.pop(session_id)
        if isinstance(log, Exception):
            raise log
        return log


async def _row(
    persistence: SessionPersistenceService,
    header: dict[str, Any],
    owners: dict[str, Owner | None],
    reads: _Reads,
) -> SessionRow:
    """One session's row; `owners`: its probed owner (an id missing there is probed alone,
    which raises why the batch probe failed); `reads`: the logs of the batch's idle ones."""
    session_id = header["id"]
    base = {"id": session_id, "created_at": header["createdAt"], "cwd": header.get("cwd")}
    if "problem" in header:  # a stored entry the backend refuses (docs/storage-safety.md)
        return SessionRow(**base, problem=str(header["problem"]))
    try:
        if session_id in owners:
            owner = owners[session_id]
        else:
            owner = await persistence.owner(session_id)
        events = (
            await persistence.read_from(session_id, 0)
            if owner is not None
            else (await reads.inspect(session_id)).events
        )
    except SessionPersistenceError as error:
        return SessionRow(**base, problem=str(error))
    seen = glance(events, owner)
    return SessionRow(
        **base,
        turns=seen.turns,
        last_reason=seen.last_reason,
        events=len(events),
        size=_size(persistence, header),
        running=owner,
        title=seen.title,
        state=seen.state,
        waiting=seen.waiting,
    )


def cells(row: SessionRow) -> tuple[tuple[str, ...], str | None]:
    """A row's cells under `COLUMNS` and its style (red: unreadable, yellow: waiting)."""
    running = None if row.running is None else running_text(row.running)
    last = row.problem or running or reason_text(row.last_reason)
    if row.waiting:
        last += f" — waiting for approval ({row.waiting})"
    style = "red" if row.problem else "yellow" if row.waiting else None
    size = "-" if row.size is None else f"{row.size:,} B"
    return (
        row.id,
        stamp(row.created_at),
        str(row.turns),
        last,
        str(row.events),
        size,
        row.state or "-",
        row.title or "-",
    ), style


def _width(text: str) -> int:
    """Terminal cells `text` takes (wide characters take two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def plain_lines(table: Sequence[tuple[str, ...]], width: int) -> list[str] | None:
    """`table` (its first row the header) laid out as rich lays out a borderless table that
    fits: each column as wide as its widest cell, `GAP` between columns. None when a line would
    be wider than `width` or a cell holds a control character (rich then wraps the cells)."""
    if any(not text.isprintable() for line in table for text in line):
        return None
    widths = [max(_width(line[index]) for line in table) for index in range(len(COLUMNS))]
    if sum(widths) + len(GAP) * (len(widths) - 1) > width:
        return None
    lines = []
    for line in table:
        padded = []
        for column, text, size in zip(COLUMNS, line, widths, strict=True):
            fill = " " * (size - _width(text))
            padded.append(fill + text if column in RIGHT else text + fill)
        lines.append(GAP.join(padded))
    return lines


def print_table(shown: Consoles, rows: Sequence[SessionRow]) -> None:
    """The listing on `shown.out`: the plain layout when it fits (fast for thousands of rows),
    else rich's `Table`, which wraps cells to the width. Cell texts are shown verbatim (no
    markup). A plain layout off a terminal is written without rich."""
    styled = [cells(row) for row in rows]
    plain = shown.plain()
    width = shown.out.width if plain is None else plain[1]
    lines = plain_lines([COLUMNS, *(texts for texts, _ in styled)], width)
    if lines is not None and plain is not None:
        plain[0].write("".join(line + "\n" for line in lines))
        return
    from rich.text import Text

    out = shown.out
    if lines is not None:
        out.print(Text(lines[0], style="bold"))
        for line, (_, style) in zip(lines[1:], styled, strict=True):
            out.print(Text(line, style=style or ""))
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in RIGHT else "left")
    for texts, style in styled:
        table.add_row(*(Text(text) for text in texts), style=style)
    out.print(table)
