"""How `dsh` answers approval questions (docs/approval.md).

On a terminal the person is asked inline (`TerminalAnswerer`). Without one (a pipe, `--json`)
the approval plugin's `unattended` setting decides: `block` leaves the question open, ends the
turn `blocked` and prints how to answer with `dsh approve` / `dsh deny`; `refuse` and `allow`
answer at once. `dsh approve` / `dsh deny` give their answer to the open question and wake the
session with a note saying what the user answered; the call then runs (or is refused) before
the model's next step.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Console
from rich.text import Text

from plugins.session.jsonutil import dumps, parse_arguments
from plugins.tool_approval import Answer, ApprovalRequest, Question, pending_questions

from .errors import USAGE, CliError
from .paths import default_manifest
from .views import JsonView, RunView

if TYPE_CHECKING:
    from framework import Context
    from plugins.agent import Agent
    from plugins.tool_approval import ApprovalService

PLUGIN = "tool-approval"


#: Stable `code`s of the approval command errors (programs branch on these, not the text).
NOT_WAITING = "APPROVAL_NOT_WAITING"
AMBIGUOUS = "APPROVAL_AMBIGUOUS"
WAITING = "APPROVAL_WAITING"
NO_PLUGIN = "APPROVAL_NOT_MOUNTED"


@dataclass(frozen=True)
class GivenAnswer:
    """`dsh approve ID [CALL_ID] [--always]` / `dsh deny ID [CALL_ID] [--reason TEXT]`."""

    call_id: str | None
    answer: Answer


def command(verb: str, session_id: str, call_id: str | None, flags: Sequence[str]) -> str:
    """The shell line answering one question, with the manifest flags of this run."""
    return shlex.join(["dsh", verb, session_id, *([call_id] if call_id else []), *flags])


def manifest_flags(manifest: Path, patches: Sequence[Path]) -> list[str]:
    """`-c M` (unless it is the default manifest) and each `--patch P` of this run."""
    flags = [] if manifest == default_manifest() else ["-c", str(manifest)]
    for patch in patches:
        flags += ["--patch", str(patch)]
    return flags


def _interactive(view: RunView) -> bool:
    return not isinstance(view, JsonView) and sys.stdin.isatty() and sys.stderr.isatty()


def prepare(
    ctx: Context,
    agent: Agent,
    view: RunView,
    prompt: str,
    given: GivenAnswer | None,
    flags: Sequence[str],
) -> str | Mapping[str, Any]:
    """Register this run's answerer and return what to send: the prompt, or for an answer the
    note that wakes the session. Refuses a prompt to a session that waits for an answer when
    nobody can be asked."""
    service: ApprovalService | None = ctx.get("approval")
    if service is None:
        if given is not None:
            raise CliError(
                "the manifest mounts no approval plugin (dsh-tool-approval)", USAGE, code=NO_PLUGIN
            )
        waiting = pending_questions(agent.session.events)
        if waiting:
            # Its calls have no results yet: without the plugin the model would see them open.
            raise CliError(
                f'session "{agent.id}" is waiting for an answer to {_count(waiting)} '
                f"({_listed(waiting)}), but the manifest mounts no approval plugin "
                "(dsh-tool-approval) to continue it",
                USAGE,
                code=NO_PLUGIN,
            )
        return prompt
    interactive = _interactive(view)
    if interactive:
        service.answer_with(TerminalAnswerer(view))
    else:
        service.answer_with(Unattended(service.config.unattended, view, flags))
    pending = service.pending(agent.session)
    if given is not None:
        question = chosen(agent.id, pending, given.call_id)
        assert question.call_id is not None
        service.answer(agent.id, question.call_id, given.answer)
        return note(question, given.answer)
    if pending and not interactive and service.config.unattended == "block":
        first = pending[0]
        raise CliError(
            f'session "{agent.id}" is waiting for an answer to {_count(pending)}: '
            f"{_listed(pending)}; answer with {command('approve', agent.id, first.call_id, flags)}"
            f" or {command('deny', agent.id, first.call_id, flags)}",
            code=WAITING,
        )
    return prompt


def waiting_lines(session_id: str, events: Sequence[Mapping[str, Any]]) -> list[str]:
    """For `dsh resume ID`: the questions a session waits on and how to answer each."""
    return [
        f"waiting for approval: {printable(q.tool_name)} ({printable(q.call_id)}); answer with "
        f"{printable(command('approve', session_id, q.call_id, []))} or "
        f"{printable(command('deny', session_id, q.call_id, []))}"
        for q in pending_questions(events)
    ]


def _count(pending: Sequence[Question]) -> str:
    return "1 approval" if len(pending) == 1 else f"{len(pending)} approvals"


def _listed(pending: Sequence[Question]) -> str:
    return ", ".join(f"{printable(q.tool_name)} ({printable(q.call_id)})" for q in pending)


def chosen(session_id: str, pending: Sequence[Question], call_id: str | None) -> Question:
    """The question `dsh approve/deny ID [CALL_ID]` answers; refused with a stable code."""
    if not pending:
        raise CliError(f'session "{session_id}" is not waiting for an approval', code=NOT_WAITING)
    if call_id is None:
        if len(pending) > 1:
            raise CliError(
                f'session "{session_id}" is waiting for {_count(pending)}: {_listed(pending)}; '
                "name the call to answer",
                USAGE,
                code=AMBIGUOUS,
            )
        return pending[0]
    for question in pending:
        if question.call_id == call_id:
            return question
    raise CliError(
        f'session "{session_id}" is not waiting for an approval of call "{printable(call_id)}" '
        f"(waiting: {_listed(pending)})",
        code=NOT_WAITING,
    )


def answer_text(answer: Answer) -> str:
    """`allowed once`, `always allowed in this session`, `rejected[: <reason>]`."""
    if answer.kind == "once":
        return "allowed once"
    if answer.kind == "always":
        return "always allowed in this session"
    return "rejected" + (f": {answer.reason}" if answer.reason else "")


def note(question: Question, answer: Answer) -> dict[str, Any]:
    """The plugin-sourced message that wakes a blocked session after `dsh approve`/`deny`."""
    text = (
        f"The user answered the approval question for {question.tool_name} "
        f"(call {question.call_id}): {answer_text(answer)}."
    )
    return {
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "plugin", "plugin": PLUGIN},
    }


def pretty(arguments: Any) -> str:
    """Arguments as indented JSON (a raw string quoted, so control characters show escaped)."""
    return json.dumps(parse_arguments(arguments), indent=2, ensure_ascii=False)


def printable(text: str | None) -> str:
    """`text` with control characters escaped: model-chosen ids must not drive the terminal."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text or "")


class TerminalAnswerer:
    """Asks the person at the terminal: `y` once, `n` reject (with an optional reason), `a`
    always for this tool in this session. End of input passes (the call is refused)."""

    def __init__(self, view: RunView) -> None:
        self.view = view
        self.console = Console(
            stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR"))
        )

    async def __call__(self, request: ApprovalRequest) -> Answer | None:
        self.view.close()
        out = self.console
        out.print(
            Text.assemble(
                ("? ", "bold yellow"),
                (printable(request.tool_name), "bold"),
                " needs your approval",
                (f"  (call {printable(request.call_id)})", "dim"),
            )
        )
        if request.reason:
            out.print(Text(f"  why: {printable(request.reason)}"))
        out.print(Text("  arguments:", style="dim"))
        for line in pretty(request.arguments).splitlines() or [""]:
            out.print(Text("    " + line))
        while True:
            reply = await self._read(
                f"  allow? [y] once  [n] reject  [a] always for {request.tool_name} "
                "in this session: "
            )
            if reply is None:
                return None
            choice = reply.strip().lower()
            if choice in ("y", "yes"):
                return Answer.once()
            if choice in ("a", "always"):
                return Answer.always()
            if choice in ("n", "no"):
                reason = await self._read("  reason for the model (optional): ")
                return Answer.reject((reason or "").strip() or None)
            out.print(Text("  answer y, n or a", style="yellow"))

    async def _read(self, prompt: str) -> str | None:
        """One line from stdin without blocking the event loop (None at end of input)."""
        sys.stderr.write(prompt)
        sys.stderr.flush()
        fd = sys.stdin.fileno()
        await anyio.wait_readable(fd)
        data = os.read(fd, 4096)
        return data.decode(errors="replace") if data else None


class Unattended:
    """Nobody at a terminal: `block` leaves the question open and prints how to answer it;
    `refuse` passes (the call is refused as unavailable); `allow` allows it once."""

    def __init__(self, mode: str, view: RunView, flags: Sequence[str]) -> None:
        self.mode = mode
        self.view = view
        self.flags = list(flags)

    async def __call__(self, request: ApprovalRequest) -> Answer | None:
        if self.mode == "allow":
            return Answer.once()
        if self.mode == "refuse":
            return None
        approve = command("approve", request.session_id, request.call_id, self.flags)
        deny = command("deny", request.session_id, request.call_id, self.flags) + " --reason TEXT"
        if isinstance(self.view, JsonView):
            line = {
                "type": "approval-needed",
                "sessionId": request.session_id,
                "questionId": request.id,
                "callId": request.call_id,
                "name": request.tool_name,
                "arguments": parse_arguments(request.arguments),
                "reason": request.reason,
                "approve": approve,
                "deny": deny,
            }
            sys.stdout.write(dumps(line) + "\n")
            sys.stdout.flush()
        else:
            self.view.notice(
                f"{printable(request.tool_name)} ({printable(request.call_id)}) needs approval: "
                f"the turn ends blocked until you answer\n  approve: {printable(approve)}\n"
                f"  deny:    {printable(deny)}"
            )
        return Answer.later()
