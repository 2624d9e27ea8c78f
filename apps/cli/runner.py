"""`dsh run` / `dsh resume`: boot, open the session's agent, drive one prompt, report."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from framework import Context, ManifestError
from framework.loader import boot
from plugins.agent import USER
from plugins.session_persistence import SetAside

from . import approving, checking
from .checking import problem_line
from .console import silence_stdout
from .errors import (
    FAILED,
    INTERRUPTED,
    OK,
    USAGE,
    CliError,
    describe,
    leaf,
)
from .stored import not_found, persistence_of, stored_events
from .summary import (
    Repairs,
    last_turn_reason,
    message_text,
    reason_text,
    repairs_in,
    turn_count,
)
from .views import Event, RunView

if TYPE_CHECKING:
    from plugins.agent import Agent, AgentHandle


log = logging.getLogger("dsh.cli")

#: The `error.code` of a turn whose end could not be made durable.
NOT_DURABLE = "SESSION_NOT_DURABLE"


def new_session_id() -> str:
    """A readable unique id: `s-<yyyymmdd>-<6 hex>`."""
    return f"s-{time.strftime('%Y%m%d')}-{secrets.token_hex(3)}"


@dataclass
class Turn:
    """What `dsh run` remembers of the live session's events."""

    session_id: str
    view: RunView
    reason: dict[str, Any] | None = None
    output: str = ""
    interrupted: bool = False

    def on_event(self, session: Any, event: Event) -> None:
        if session.id != self.session_id:
            return
        try:
            self.view.event(event)
        except BrokenPipeError:
            # The reader went away (`dsh run --json ... | head -3`): the output ends quietly,
            # the turn runs on to its durable end.
            silence_stdout()
        if event["type"] == "assistant/message":
            self.output = message_text(event["data"]["message"])
        elif event["type"] == "turn/end":
            self.reason = event["data"]["reason"]


@dataclass
class RunOptions:
    """`dsh run` / `dsh resume ID PROMPT`."""

    manifest: Path
    patches: Sequence[Path] = ()
    session_id: str | None = None
    prompt: str = ""
    #: `dsh approve` / `dsh deny`: the answer to the session's open question.
    answer: approving.GivenAnswer | None = None
    #: `dsh resume ID PROMPT`: the session must be stored (only `run --session` creates).
    must_exist: bool = False


async def _open(ctx: Context, options: RunOptions) -> tuple[AgentHandle, bool, Repairs]:
    agents = ctx.get("agents")
    if agents is None:
        raise CliError("the manifest mounts no agent (a dsh-agent row)", USAGE)
    session_id = options.session_id
    stored = None if session_id is None else await stored_events(ctx, session_id)
    if stored is None and options.must_exist:
        raise not_found(session_id)
    if stored is None:
        log.debug("creating session %s", session_id or "(new id)")
        handle: AgentHandle = await agents.create(
            session_id or new_session_id(), meta={"cwd": os.getcwd()}
        )
        return handle, False, Repairs()
    assert session_id is not None
    log.debug("resuming session %s (%d stored events)", session_id, len(stored))
    handle = await agents.resume(session_id)
    return handle, True, repairs_in(handle.agent.session.events[len(stored) :])


async def _cancel_on_sigint(
    agent: Agent, turn: Turn, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """First Ctrl-C: cancel the turn (`{"kind":"user"}`; a running tool body gets its grace);
    a second one cuts running tool bodies short at once; a third exits at once."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        presses = 0
        async for _ in signals:
            presses += 1
            if presses == 1:
                turn.interrupted = True
                turn.view.notice(
                    "interrupted: cancelling the turn (Ctrl-C again to stop tools now)"
                )
                agent.cancel(USER)
            elif presses == 2:
                turn.view.notice("stopping running tools now (Ctrl-C again to quit at once)")
                agent.service.tools.skip_grace(agent)
            else:
                turn.view.close()
                os._exit(INTERRUPTED)


async def _durable_end(ctx: Context, agent: Agent) -> BaseException | None:
    """Flush the session once more after the turn: None when everything it appended (its
    `turn/end` included) is durable, else the storage failure (see docs/cli.md)."""
    try:
        await ctx.sessions.flush(agent.session)
    except Exception as error:
        log.debug("final flush of %s failed", agent.id, exc_info=error)
        return leaf(error)
    return None


def not_durable(reason: Mapping[str, Any], error: BaseException) -> dict[str, Any]:
    """The reason `dsh run` reports when the turn ended but its end could not be stored."""
    detail = describe(error)
    return {
        "kind": "error",
        "error": {
            "code": NOT_DURABLE,
            "message": f"the turn ended ({reason_text(reason)}) but storing it failed: {detail}",
        },
        "turnReason": dict(reason),
    }


async def run(options: RunOptions, view: RunView) -> int:
    """Send one prompt and wait for the agent to go idle; the exit code of the turn."""
    refused = checking.refusals(options.manifest, options.patches)
    if refused:
        raise ManifestError("\n".join(problem_line(problem) for problem in refused))
    log.debug("booting %s with overlays %s", options.manifest, list(options.patches))
    async with boot(options.manifest, options.patches) as ctx:
        handle, resumed, repairs = await _open(ctx, options)
        agent = handle.agent
        turn = Turn(agent.id, view)
        flags = approving.manifest_flags(options.manifest, options.patches)
        ctx.on("session/event", turn.on_event)
        failure: BaseException | None = None
        try:
            view.started(agent.id, resumed=resumed, repairs=repairs)
            if resumed:
                for kept in persistence_of(ctx).set_aside(agent.id):
                    view.notice(set_aside_text(kept))
            message = approving.prepare(ctx, agent, view, options.prompt, options.answer, flags)
            async with anyio.create_task_group() as group:
                await group.start(_cancel_on_sigint, agent, turn)
                agent.followup(message)
                await agent.when_idle()
                group.cancel_scope.cancel()
            failure = await _durable_end(ctx, agent)
        finally:
            view.close()
            with anyio.CancelScope(shield=True):
                await handle.dispose()
        if turn.reason is None:
            raise CliError(f'session "{agent.id}": the agent went idle without ending its turn')
        reason = turn.reason if failure is None else not_durable(turn.reason, failure)
        stored = await stored_events(ctx, agent.id) is not None
        try:
            view.finished(agent.id, reason, turn.output, stored=stored)
        except BrokenPipeError:
            silence_stdout()
    if turn.interrupted:
        return INTERRUPTED
    return OK if reason.get("kind") == "completed" else FAILED


@dataclass(frozen=True)
class Recovery:
    """What `dsh resume ID` found: repairs this load wrote, repairs already in the log."""

    session_id: str
    added: Repairs
    earlier: Repairs
    events: Sequence[Mapping[str, Any]]
    set_aside: Sequence[SetAside] = ()

    def lines(self) -> list[str]:
        """E.g. `recovered: 1 tool call with unknown outcome, ...` and the session's state."""
        lines = [f"recovered: {self.added.describe()}" if self.added else "nothing to recover"]
        lines += [set_aside_text(kept) for kept in self.set_aside]
        if self.earlier:
            lines.append(f"earlier repairs: {self.earlier.describe()}")
        turns = turn_count(self.events)
        last = reason_text(last_turn_reason(self.events)) if turns else "no turns yet"
        plural = "turn" if turns == 1 else "turns"
        lines.append(
            f"session {self.session_id}: {turns} {plural}, last: {last}, {len(self.events)} events"
        )
        lines.extend(approving.waiting_lines(self.session_id, self.events))
        return lines

    def to_json(self) -> dict[str, Any]:
        """The `--json` object (`setAside` only when a repair set bytes aside)."""
        line: dict[str, Any] = {
            "type": "recovered",
            "sessionId": self.session_id,
            "recovered": self.added.to_json(),
            "earlier": self.earlier.to_json(),
            "turns": turn_count(self.events),
            "lastReason": last_turn_reason(self.events),
            "events": len(self.events),
        }
        if self.set_aside:
            line["setAside"] = [{"path": k.path, "bytes": k.size} for k in self.set_aside]
        return line


async def recover(options: RunOptions) -> Recovery:
    """`dsh resume ID`: load the session, committing any repair, and tell what was repaired."""
    session_id = options.session_id
    assert session_id is not None
    async with boot(options.manifest, options.patches) as ctx:
        persistence = persistence_of(ctx)
        stored = await stored_events(ctx, session_id)
        if stored is None:
            raise not_found(session_id)
        log = await persistence.load(session_id)
        kept = persistence.set_aside(session_id)
    return Recovery(
        session_id, repairs_in(log.events[len(stored) :]), repairs_in(stored), log.events, kept
    )


def set_aside_text(kept: SetAside) -> str:
    """E.g. `set aside: 312 bytes cut from the log's torn tail, kept in /…/session.jsonl.torn-…`."""
    return f"set aside: {kept.size} bytes cut from the log's torn tail, kept in {kept.path}"
