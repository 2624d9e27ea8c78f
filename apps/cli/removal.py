"""`dsh rm` and `dsh prune`: delete stored sessions, never one that is running or waiting.

A session another process runs is refused by the backend's writer lock (`SessionLockedError`);
`prune` also keeps every session with a pending approval, every log it cannot read (that is
evidence for `dsh doctor`) and the `--keep` newest (docs/sessions.md).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from plugins.session_persistence import (
    SessionLockedError,
    SessionPersistenceError,
    SessionPersistenceService,
)

from .errors import USAGE, CliError
from .states import state_of

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str) -> int:
    """`90s`, `15m`, `12h`, `30d`, `2w` or a sum such as `1d12h`, in milliseconds."""
    compact = text.strip().lower()
    parts = _DURATION.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise CliError(
            f"--older-than: {text!r} is not a duration (e.g. 90s, 15m, 12h, 30d, 2w, 1d12h)",
            USAGE,
        )
    return sum(int(n) * _UNITS[u] for n, u in parts) * 1000


@dataclass(frozen=True)
class Decision:
    """What `prune` does with one session: `action` is `remove`, `removed`, `keep` or `failed`;
    `reason` says why (for `keep` and `failed`); `last_active` is the epoch ms of its last
    event."""

    session_id: str
    action: str
    last_active: int
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `--json` line."""
        line: dict[str, Any] = {
            "type": "prune",
            "sessionId": self.session_id,
            "action": self.action,
            "lastActive": self.last_active,
        }
        if self.reason is not None:
            line["reason"] = self.reason
        return line

    def text(self, now_ms: int) -> str:
        """E.g. `removed s-1 (idle 31d)` or `kept s-2: running (pid 4 on host h)`."""
        age = _age(now_ms - self.last_active)
        if self.action == "keep":
            return f"kept {self.session_id}: {self.reason}"
        if self.action == "failed":
            return f"failed to remove {self.session_id}: {self.reason}"
        verb = "would remove" if self.action == "remove" else "removed"
        return f"{verb} {self.session_id} (last active {age} ago)"


def _age(ms: int) -> str:
    seconds = max(ms, 0) // 1000
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit]:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


async def prune(
    persistence: SessionPersistenceService,
    *,
    older_than_ms: int,
    keep: int = 0,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> list[Decision]:
    """Remove the sessions whose last event is older than `older_than_ms`, newest `keep` spared,
    running, waiting and unreadable ones kept; with `dry_run` only decide. Newest first."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    headers = sorted(await persistence.list(), key=lambda h: (h["createdAt"], h["id"]))
    decisions: list[Decision] = []
    for index, header in enumerate(reversed(headers)):
        session_id = header["id"]
        decisions.append(
            await _decide(persistence, session_id, header, index < keep, now - older_than_ms)
        )
    if dry_run:
        return decisions
    done = []
    for decision in decisions:
        if decision.action == "remove":
            decision = await _carry_out(persistence, decision)
        done.append(decision)
    return done


async def _decide(
    persistence: SessionPersistenceService,
    session_id: str,
    header: dict[str, Any],
    spared: bool,
    cutoff: int,
) -> Decision:
    created = int(header["createdAt"])
    try:
        owner = await persistence.owner(session_id)
        events = await persistence.read_from(session_id, 0)
    except SessionPersistenceError as error:
        return Decision(session_id, "keep", created, f"cannot be read ({error}); see dsh doctor")
    last = max([created, *(int(e["time"]) for e in events[-1:])])
    state = state_of(events, owner)
    if state == "waiting":
        return Decision(session_id, "keep", last, "an approval is pending")
    if owner is not None:
        pid = "unknown" if owner.pid is None else owner.pid
        return Decision(session_id, "keep", last, f"running (pid {pid} on host {owner.host})")
    if spared:
        return Decision(session_id, "keep", last, "among the --keep newest")
    if last >= cutoff:
        return Decision(session_id, "keep", last, "recently active")
    return Decision(session_id, "remove", last)


async def _carry_out(persistence: SessionPersistenceService, decision: Decision) -> Decision:
    try:
        # Decided from a read without the lock: the delete takes it, and a writer that started
        # since then makes it fail rather than remove a running session.
        await persistence.delete(decision.session_id)
    except SessionLockedError as error:
        return Decision(decision.session_id, "keep", decision.last_active, str(error))
    except SessionPersistenceError as error:
        return Decision(decision.session_id, "failed", decision.last_active, str(error))
    return Decision(decision.session_id, "removed", decision.last_active)
