"""`dsh doctor`: check stored session logs without changing them, and repair what is safe.

Checks (each finding is one sentence and the fix): the log's header and format, committed
corruption (with its line or seq; seq gaps are reported this way), a torn tail, an open turn,
tool calls without a result (or results without a call) in closed turns, legacy shapes this build
upgrades on every read, the permissions and ownership of the log's file and folder, and a lock a
dead writer left behind. `--apply` performs only the repair a load performs (torn bytes set aside
beside the log, closers appended), after a backup copy of the stored log (docs/sessions.md).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plugins.agent.opening import Repairs, repairs_in
from plugins.session.jsonutil import dumps
from plugins.session.repair import interrupted_turn_closers
from plugins.session_persistence import (
    SessionFormatUnsupportedError,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
    SessionPersistenceService,
)
from plugins.session_persistence.home import dsh_home

Event = dict[str, Any]


@dataclass(frozen=True)
class Finding:
    """One problem: `check` names the check, `text` says what is wrong, `fix` what to do;
    `repairable` when `--apply` repairs it."""

    session_id: str
    check: str
    text: str
    fix: str
    repairable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "finding",
            "sessionId": self.session_id,
            "check": self.check,
            "message": self.text,
            "fix": self.fix,
            "repairable": self.repairable,
        }

    def line(self) -> str:
        return f"{self.session_id}: {self.check}: {self.text} Fix: {self.fix}"


@dataclass(frozen=True)
class Repair:
    """What `--apply` changed in one session."""

    session_id: str
    backup: str
    appended: Sequence[Event] = ()
    set_aside: Sequence[tuple[str, int]] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "repaired",
            "sessionId": self.session_id,
            "backup": self.backup,
            "appended": [{"seq": e["seq"], "type": e["type"]} for e in self.appended],
            "setAside": [{"path": path, "bytes": size} for path, size in self.set_aside],
        }

    def lines(self) -> list[str]:
        lines = [f"{self.session_id}: backup of the stored log in {self.backup}"]
        for path, size in self.set_aside:
            lines.append(f"{self.session_id}: cut a torn tail of {size} bytes, kept in {path}")
        if self.appended:
            what = repairs_in(self.appended).describe() or "closing events"
            first, last = self.appended[0]["seq"], self.appended[-1]["seq"]
            lines.append(
                f"{self.session_id}: appended {len(self.appended)} closing events "
                f"(seq {first}..{last}): {what}"
            )
        return lines


async def examine(persistence: SessionPersistenceService, session_id: str) -> list[Finding]:
    """Every finding for one session; reads only."""
    found: list[Finding] = []

    def add(check: str, text: str, fix: str, repairable: bool = False) -> None:
        found.append(Finding(session_id, check, text, fix, repairable))

    try:
        log = await persistence.inspect(session_id)
        stored = await persistence.read_from(session_id, 0)
    except SessionNotFoundError:
        raise
    except SessionFormatUnsupportedError as error:
        add("format", f"{error}.", "open it with a harness that reads this format.")
        return found
    except SessionPersistenceCorruptionError as error:
        add(
            "corruption",
            f"{error}; its committed part is damaged, so nothing loads or repairs it.",
            "restore the log from a backup; `dsh show --raw` prints what is stored.",
        )
        return found
    except SessionPersistenceError as error:
        add("header", f"{error}.", "move the file back where its header says it belongs.")
        return found
    location = persistence.locate(log.header)
    if location is not None and location.kind == "file":
        _file_checks(location.path, add)
    owner = await persistence.owner(session_id)
    if owner is not None:
        return found  # its writer is at work: an open turn and an unflushed tail are normal
    if log.torn_bytes:
        add(
            "torn tail",
            f"the log ends in {log.torn_bytes} bytes of a write a crash cut short.",
            "`dsh doctor ID --apply` (or `dsh resume ID`) cuts them off and keeps them beside "
            "the log.",
            True,
        )
    closers = interrupted_turn_closers(stored)
    if closers:
        turn = closers[-1]["data"]["turn"]
        pending = repairs_in(closers)
        calls = Repairs(pending.unknown, pending.not_started)
        extra = f" ({calls.describe()})" if calls else ""
        add(
            "open turn",
            f"turn {turn} never ended{extra}: the process running it stopped.",
            "`dsh doctor ID --apply` (or `dsh resume ID`) closes it as interrupted.",
            True,
        )
    for text in _unbalanced(stored):
        add(
            "tool calls",
            text,
            "fork the session before that turn (`dsh fork ID --turn N`) to continue cleanly.",
        )
    legacy = await _legacy_count(persistence, session_id, stored)
    if legacy:
        add(
            "legacy shapes",
            f"{legacy} stored events use a shape of the original harness this build upgrades "
            "on every read.",
            "nothing is needed; `dsh copy` writes them in the current shape.",
        )
    stale = await persistence.stale_lock(session_id)
    if stale is not None:
        add(
            "stale lock",
            f"a lock record names pid {stale.pid} on host {stale.host}, which no longer holds it.",
            "nothing is needed: the next writer takes it over (`dsh resume ID` clears it).",
        )
    return found


def _file_checks(path: str, add: Any) -> None:
    for target, kind in ((path, "file"), (os.path.dirname(path), "folder")):
        try:
            st = os.lstat(target)
        except OSError:
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            wanted = "600" if kind == "file" else "700"
            add(
                "permissions",
                f"the log's {kind} {target} has mode {mode:o}: others may read or change it.",
                f"`chmod {wanted} {target}`.",
            )
        if st.st_uid != os.getuid():
            add(
                "ownership",
                f"the log's {kind} {target} belongs to uid {st.st_uid}, not to you "
                f"({os.getuid()}).",
                f"`chown {os.getuid()} {target}` (as its owner or root).",
            )


def _unbalanced(events: Sequence[Event]) -> list[str]:
    """Tool calls of closed turns with no result, and results naming no call."""
    problems: list[str] = []
    calls: dict[str, tuple[int, str]] = {}
    answered: set[str] = set()
    for event in events:
        data = event.get("data")
        if event["type"] == "assistant/message" and isinstance(data, dict):
            for block in data["message"].get("content", ()):
                if block.get("type") == "tool-call":
                    calls[str(block.get("id"))] = (data["turn"], str(block.get("name")))
        elif event["type"] == "tool/result" and isinstance(data, dict):
            call_id = str(data["message"].get("source", {}).get("callId"))
            if call_id not in calls:
                problems.append(
                    f"the tool result at seq {event['seq']} answers call {call_id}, which no "
                    "assistant message made."
                )
            answered.add(call_id)
        elif event["type"] == "turn/end" and isinstance(data, dict):
            for call_id, (turn, name) in calls.items():
                if turn == data["turn"] and call_id not in answered:
                    problems.append(
                        f"tool call {call_id} ({name}) of turn {turn} has no result, so the "
                        "model would see a call left unanswered."
                    )
    return problems


async def _legacy_count(
    persistence: SessionPersistenceService, session_id: str, upgraded: Sequence[Event]
) -> int:
    """How many stored events reads upgrade (the backend's raw events against `read_from`)."""
    raw = await persistence.backend.load_stored(session_id)
    if raw is None:
        return 0
    return sum(1 for a, b in zip(raw.events, upgraded, strict=False) if dumps(a) != dumps(b))


def _backup_path(session_id: str, suffix: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:80]
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stamp = time.time_ns() // 1_000_000
    return dsh_home() / "backups" / f"{safe}-{digest}-{stamp}{suffix}"


async def back_up(persistence: SessionPersistenceService, session_id: str) -> Path:
    """A durable copy of what is stored: the artifact verbatim where the backend keeps one,
    else the header and events as JSONL lines. 0600 in `$DSH_HOME/backups/` (0700)."""
    log = await persistence.inspect(session_id)
    try:
        data = await persistence.read_raw(session_id)
        location = persistence.locate(log.header)
        suffix = "".join(Path(location.path).suffixes) if location is not None else ".raw"
    except SessionPersistenceError:
        stored = await persistence.read_from(session_id, 0)
        lines = [dumps({"type": "session", **log.header}), *map(dumps, stored)]
        data, suffix = ("\n".join(lines) + "\n").encode(), ".jsonl"
    path = _backup_path(session_id, suffix)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return path


async def repair(persistence: SessionPersistenceService, session_id: str) -> Repair:
    """Back the log up, then load it (the load commits the repair); what changed."""
    backup = await back_up(persistence, session_id)
    before = len(await persistence.read_from(session_id, 0))
    log = await persistence.load(session_id)
    kept = [(k.path, k.size) for k in persistence.set_aside(session_id)]
    return Repair(session_id, str(backup), log.events[before:], kept)


def summary_json(sessions: int, findings: Sequence[Finding]) -> Mapping[str, Any]:
    return {"type": "summary", "sessions": sessions, "findings": len(findings)}
