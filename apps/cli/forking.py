"""`dsh fork`: a new stored session seeded with a source session up to a turn boundary.

The fork point is recorded in the new session's header (`parentSession`, `seedLength`). The
tool calls the source ran after the boundary are listed with whether the manifest knows them as
read-only: running the fork again from there may repeat their side effects (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework import Context
from plugins.agent.opening import new_session_id
from plugins.session import SessionForkError, fork_seed
from plugins.session.repair import repair_code
from plugins.session_persistence import SessionNotFoundError

from .errors import USAGE, CliError
from .stored import persistence_of
from .summary import tool_result_is_error

Event = Mapping[str, Any]


@dataclass(frozen=True)
class RanCall:
    """A tool call whose body ran in the source after the fork point (`tool/call` is logged).

    `read_only`: True/False from the manifest's tool, None when the manifest has no such tool.
    `outcome`: `ok`, `error`, `unknown` (interrupted after it started) or `no result`.
    """

    call_id: str
    name: str
    turn: int
    seq: int
    read_only: bool | None
    outcome: str

    def to_json(self) -> dict[str, Any]:
        return {
            "callId": self.call_id,
            "name": self.name,
            "turn": self.turn,
            "seq": self.seq,
            "readOnly": self.read_only,
            "outcome": self.outcome,
        }

    def text(self) -> str:
        """E.g. `write_file (call c-1, turn 1, seq 14): may have side effects; result: ok`."""
        if self.read_only is None:
            kind = "not a tool of this manifest: side effects unknown"
        else:
            kind = "read-only" if self.read_only else "may have side effects"
        return (
            f"{self.name} (call {self.call_id}, turn {self.turn}, seq {self.seq}): {kind}; "
            f"result: {self.outcome}"
        )


@dataclass(frozen=True)
class Fork:
    """A fork made: the new id, its source and boundary, and what ran after the boundary."""

    session_id: str
    parent: str
    boundary: int
    ran: Sequence[RanCall] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "forked",
            "sessionId": self.session_id,
            "parentSession": self.parent,
            "boundary": self.boundary,
            "seedLength": self.boundary + 1,
            "toolCalls": [call.to_json() for call in self.ran],
        }

    def lines(self) -> list[str]:
        lines = [
            f"forked {self.parent} at seq {self.boundary} as {self.session_id} "
            f"({self.boundary + 1} events seeded; fork point recorded in its header)"
        ]
        effects = [call for call in self.ran if call.read_only is not True]
        if self.ran:
            count = len(self.ran)
            plural = "tool call" if count == 1 else "tool calls"
            lines.append(
                f"{count} {plural} ran in {self.parent} after the fork point"
                + (
                    f"; re-running from the fork may repeat {len(effects)} with side effects:"
                    if effects
                    else " (all read-only):"
                )
            )
            lines += [f"  - {call.text()}" for call in self.ran]
        return lines


def boundary_of(
    session_id: str, events: Sequence[Event], at: int | None, turn: int | None
) -> int | None:
    """The boundary seq of `--at SEQ` / `--turn N` (the seq of turn N's `turn/end`); None for
    the default (the last event)."""
    if at is not None and turn is not None:
        raise CliError("give --at SEQ or --turn N, not both", USAGE)
    if turn is None:
        return at
    for event in events:
        if event["type"] == "turn/end" and event["data"].get("turn") == turn:
            return int(event["seq"])
    raise SessionForkError(
        f'session "{session_id}" has no ended turn {turn} to fork at', "INVALID_BOUNDARY"
    )


def ran_after(events: Sequence[Event], boundary: int, tools: Any) -> list[RanCall]:
    """The `tool/call`s after `boundary`, each with its read-only flag and outcome."""
    results: dict[str, Event] = {}
    for event in events[boundary + 1 :]:
        if event["type"] == "tool/result":
            source = event["data"]["message"].get("source", {})
            results[str(source.get("callId"))] = event
    calls = []
    for event in events[boundary + 1 :]:
        if event["type"] != "tool/call":
            continue
        data = event["data"]
        tool = None if tools is None else tools.get(data["name"])
        result = results.get(str(data["callId"]))
        if result is None:
            outcome = "no result"
        elif repair_code(result) is not None:
            outcome = "unknown"
        else:
            outcome = "error" if tool_result_is_error(result["data"]["message"]) else "ok"
        read_only = None if tool is None else bool(tool.read_only)
        calls.append(
            RanCall(data["callId"], data["name"], data["turn"], event["seq"], read_only, outcome)
        )
    return calls


async def fork(
    ctx: Context,
    source_id: str,
    *,
    at: int | None = None,
    turn: int | None = None,
    new_id: str | None = None,
) -> Fork:
    """Fork stored session `source_id` (read-only: the source is never repaired or written;
    a crashed source is forked from its balanced log, repair closers included)."""
    persistence = persistence_of(ctx)
    sessions = ctx.get("sessions")
    if sessions is None:
        raise CliError("the manifest mounts no session store (a dsh-session row)", USAGE)
    try:
        log = await persistence.inspect(source_id)
    except SessionNotFoundError:
        raise SessionForkError(f'session "{source_id}" not found', "SESSION_NOT_FOUND") from None
    boundary = boundary_of(source_id, log.events, at, turn)
    seed, meta = fork_seed(source_id, log.header, log.events, boundary)
    target = new_id or new_session_id()
    try:
        await persistence.read_from(target, 0)
    except SessionNotFoundError:
        pass
    else:
        raise SessionForkError(f'session "{target}" already exists', "SESSION_ALREADY_EXISTS")
    session = sessions.create(target, seed=seed, meta=meta)
    try:
        await sessions.flush(session)
    finally:
        sessions.dispose(session)
    await persistence.read_from(target, 0)  # returns once the retirement has written it all
    last = len(seed) - 1
    return Fork(target, source_id, last, ran_after(log.events, last, ctx.get("tools")))
