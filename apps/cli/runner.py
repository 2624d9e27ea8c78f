"""`dsh run` / `dsh resume`: boot, open the session's agent, stream one prompt's turn, report.

`run` is built on the library's `agents.open` and `agents.stream` (docs/python-api.md): the
views show the stream's items, and the result is the stream's `RunResult`, so `dsh run` and a
library user see the same turn and the same durability verdict.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from framework import Context, ManifestError
from framework.loader import boot
from plugins.agent import USER, RunResult, TurnEnd
from plugins.agent.opening import Repairs, repairs_in
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
)
from .stored import not_found, persistence_of, stored_events
from .summary import last_turn_reason, reason_text, turn_count
from .views import RunView

if TYPE_CHECKING:
    from plugins.agent import Agent, AgentsService


log = logging.getLogger("dsh.cli")


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


@dataclass
class Presses:
    """How often Ctrl-C was pressed during the turn."""

    count: int = 0


async def _cancel_on_sigint(
    agent: Agent,
    view: RunView,
    presses: Presses,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """First Ctrl-C: cancel the turn (`{"kind":"user"}`; a running tool body gets its grace);
    a second one cuts running tool bodies short at once; a third exits at once."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            presses.count += 1
            if presses.count == 1:
                view.notice("interrupted: cancelling the turn (Ctrl-C again to stop tools now)")
                agent.cancel(USER)
            elif presses.count == 2:
                view.notice("stopping running tools now (Ctrl-C again to quit at once)")
                agent.service.tools.skip_grace(agent)
            else:
                view.close()
                os._exit(INTERRUPTED)


def agents_of(ctx: Context) -> AgentsService:
    """The manifest's `agents`, or a usage error."""
    agents: AgentsService | None = ctx.get("agents")
    if agents is None:
        raise CliError("the manifest mounts no agent (a dsh-agent row)", USAGE)
    return agents


async def run(options: RunOptions, view: RunView) -> int:
    """Send one prompt and stream its turn until the agent is idle; the exit code of the turn."""
    refused = checking.refusals(options.manifest, options.patches)
    if refused:
        raise ManifestError("\n".join(problem_line(problem) for problem in refused))
    log.debug("booting %s with overlays %s", options.manifest, list(options.patches))
    async with boot(options.manifest, options.patches) as ctx:
        agents = agents_of(ctx)
        opened = await agents.open(
            options.session_id, meta={"cwd": os.getcwd()}, create=not options.must_exist
        )
        log.debug("%s session %s", opened.how, opened.session_id)
        agent = opened.agent
        flags = approving.manifest_flags(options.manifest, options.patches)
        presses = Presses()
        try:
            view.started(opened)
            for kept in opened.set_aside:
                view.notice(set_aside_text(kept))
            message = approving.prepare(ctx, agent, view, options.prompt, options.answer, flags)
            async with anyio.create_task_group() as group:
                await group.start(_cancel_on_sigint, agent, view, presses)
                result = await _stream(agents, agent, message, view)
                group.cancel_scope.cancel()
        finally:
            view.close()
            with anyio.CancelScope(shield=True):
                await opened.dispose()
        stored = await stored_events(ctx, agent.id) is not None
        try:
            view.finished(agent.id, result.reason, result.text, stored=stored)
        except BrokenPipeError:
            silence_stdout()
    if presses.count:
        return INTERRUPTED
    return OK if result.completed else FAILED


async def _stream(
    agents: AgentsService, agent: Agent, message: str | Mapping[str, Any], view: RunView
) -> RunResult:
    """Show the turn's items as they come; its result."""
    result: RunResult | None = None
    async with aclosing(agents.stream(message, session=agent.id, progress=True)) as items:
        async for item in items:
            try:
                view.item(item)
            except BrokenPipeError:
                # The reader went away (`dsh run --json ... | head -3`): the output ends
                # quietly, the turn runs on to its durable end.
                silence_stdout()
            if isinstance(item, TurnEnd):
                result = item.result
    assert result is not None, "a turn stream ends with TurnEnd or raises"
    return result


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
