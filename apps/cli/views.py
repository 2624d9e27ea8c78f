"""How `dsh run` shows a turn as it happens: for a person (rich) or as JSON lines.

Both views read the items of `agents.stream(..., progress=True)` (docs/python-api.md), so what
`dsh run` shows is what a library user of the stream sees.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from rich.console import Console
from rich.status import Status
from rich.text import Text

from plugins.agent import (
    BlockEnd,
    MessageEnd,
    Opened,
    ReasoningDelta,
    RetryScheduled,
    StepStart,
    StreamItem,
    TextDelta,
    ToolCall,
    ToolCallStart,
    ToolResult,
    TurnEnd,
)
from plugins.session.jsonutil import dumps, loads
from plugins.session.repair import NOT_STARTED, UNKNOWN_OUTCOME

from .console import Consoles
from .summary import content_text, reason_text, short


class RunView(Protocol):
    """Shows the turn `dsh run` drives."""

    def started(self, opened: Opened) -> None:
        """The agent is open (a new or a resumed session, with what its load repaired)."""

    def item(self, item: StreamItem) -> None:
        """One item of the turn's stream."""

    def notice(self, text: str) -> None:
        """A remark for the person at the keyboard (e.g. "cancelling the turn")."""

    def finished(
        self, session_id: str, reason: Mapping[str, Any], output: str, *, stored: bool
    ) -> None:
        """The turn ended with `reason`; `output` is its last assistant text; `stored` says
        whether the session is on disk (so it can be resumed)."""

    def close(self) -> None:
        """Stop anything still animated."""


class HumanView:
    """Streams text to `out`; tool calls, results, reasoning and the outcome to `deco`."""

    def __init__(self, consoles: Consoles) -> None:
        self.out = consoles.out
        self.deco = consoles.deco
        self.animate = consoles.interactive
        self._status: Status | None = None
        self._open: Console | None = None  # the console holding an unfinished line

    # -- plumbing --------------------------------------------------------------------------

    def _spin(self, text: str) -> None:
        if not self.animate:
            return
        if self._status is None:
            self._status = self.deco.status(text, spinner="dots")
            self._status.start()
        else:
            self._status.update(text)

    def _still(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _write(self, console: Console, text: str, style: str = "") -> None:
        """Continue a streamed line: verbatim into a pipe, control codes stripped on a
        terminal."""
        self._still()
        if self._open is not None and self._open is not console:
            self._end_line()
        if console.is_terminal:
            console.print(Text(text, style=style), end="")
        else:
            console.file.write(text)
            console.file.flush()
        self._open = console

    def _end_line(self) -> None:
        if self._open is not None:
            self._open.print()
            self._open = None

    def _line(self, text: Text) -> None:
        self._still()
        self._end_line()
        self.deco.print(text)

    # -- RunView ---------------------------------------------------------------------------

    def started(self, opened: Opened) -> None:
        line = Text.assemble(("session ", "dim"), (opened.session_id, "bold cyan"))
        if opened.resumed:
            line.append(" (resumed)", style="dim")
        self._line(line)
        if opened.repairs:
            self._line(Text(f"recovered: {opened.repairs.describe()}", style="yellow"))

    def item(self, item: StreamItem) -> None:
        if isinstance(item, StepStart):
            self._spin("waiting for the model…")
        elif isinstance(item, TextDelta):
            self._write(self.out, item.text)
        elif isinstance(item, ReasoningDelta):
            self._write(self.deco, item.text, "dim italic")
        elif isinstance(item, BlockEnd):
            self._end_line()
        elif isinstance(item, ToolCallStart):
            self._spin("the model is writing a tool call…")
        elif isinstance(item, MessageEnd):
            self._end_line()
            if item.interrupted:
                self._line(Text("(response interrupted)", style="yellow"))
        elif isinstance(item, ToolCall):
            args = short(dumps(item.arguments))
            self._line(Text.assemble(("→ ", "cyan"), (item.name, "bold"), " ", (args, "dim")))
            self._spin(f"running {item.name}…")
        elif isinstance(item, ToolResult):
            self._tool_result(item)
        elif isinstance(item, RetryScheduled):
            self._line(
                Text(
                    f"retry {item.retry} in {item.delay_ms} ms: {item.message} ({item.code})",
                    style="yellow",
                )
            )
            self._spin("waiting to retry…")
        elif isinstance(item, TurnEnd):
            self._still()
            self._end_line()

    def _tool_result(self, result: ToolResult) -> None:
        name = result.name or result.call_id
        if result.repair == UNKNOWN_OUTCOME:
            line = Text.assemble(("⚠ ", "yellow"), (name, "bold"), (": outcome unknown", "yellow"))
        elif result.repair == NOT_STARTED:
            line = Text.assemble(("⚠ ", "yellow"), (name, "bold"), (": not started", "yellow"))
        elif result.is_error:
            text = short(content_text(result.content))
            line = Text.assemble(("✗ ", "red"), (name, "bold"), ": ", (text, "red"))
        else:
            text = short(content_text(result.content))
            line = Text.assemble(("✓ ", "green"), (name, "bold"), ": ", (text, "dim"))
        self._line(line)

    def notice(self, text: str) -> None:
        self._line(Text(text, style="yellow"))

    def finished(
        self, session_id: str, reason: Mapping[str, Any], output: str, *, stored: bool
    ) -> None:
        completed = reason.get("kind") == "completed"
        mark, style = ("✓", "green") if completed else ("✗", "red")
        self._line(Text.assemble((f"{mark} {reason_text(reason)}", style)))
        if not stored:
            self._line(Text(f"session {session_id} was not stored", style="red"))
            return
        self._line(
            Text.assemble(
                ("session ", "dim"),
                (session_id, "bold cyan"),
                (f' — continue with: dsh resume {shlex.quote(session_id)} "…"', "dim"),
            )
        )

    def close(self) -> None:
        self._still()
        self._end_line()


def result_value(content: list[dict[str, Any]]) -> Any:
    """A tool result as a value: its text parsed as JSON when it is JSON (a tool returning a
    mapping or a list stores it as JSON text), the text otherwise."""
    text = content_text(content)
    try:
        return loads(text)
    except ValueError:
        return text


class JsonView:
    """One JSON object per line on stdout: `session`, then `text`, `reasoning`, `tool-call`,
    `tool-result` and `retry` as they happen, then `result`."""

    @staticmethod
    def _emit(value: dict[str, Any]) -> None:
        sys.stdout.write(dumps(value) + "\n")
        sys.stdout.flush()

    def started(self, opened: Opened) -> None:
        line: dict[str, Any] = {
            "type": "session",
            "sessionId": opened.session_id,
            "resumed": opened.resumed,
        }
        if opened.resumed:
            line["recovered"] = opened.repairs.to_json()
        self._emit(line)
        if opened.repairs:
            print(f"dsh: recovered: {opened.repairs.describe()}", file=sys.stderr)

    def item(self, item: StreamItem) -> None:
        line = json_line(item)
        if line is not None:
            self._emit(line)

    def notice(self, text: str) -> None:
        print(f"dsh: {text}", file=sys.stderr)

    def finished(
        self, session_id: str, reason: Mapping[str, Any], output: str, *, stored: bool
    ) -> None:
        self._emit(
            {
                "type": "result",
                "sessionId": session_id,
                "stored": stored,
                "output": output,
                "reason": reason,
            }
        )

    def close(self) -> None:
        """Nothing animated."""


def json_line(item: StreamItem) -> dict[str, Any] | None:
    """The `--json` line of a stream item (None: the item has no line)."""
    if isinstance(item, TextDelta):
        return {"type": "text", "text": item.text}
    if isinstance(item, ReasoningDelta):
        return {"type": "reasoning", "text": item.text}
    if isinstance(item, ToolCall):
        return {
            "type": "tool-call",
            "callId": item.call_id,
            "name": item.name,
            "arguments": item.arguments,
        }
    if isinstance(item, ToolResult):
        line: dict[str, Any] = {
            "type": "tool-result",
            "callId": item.call_id,
            "name": item.name or None,
            "isError": item.is_error,
            "value": result_value(item.content),
        }
        if item.error is not None:
            line["error"] = item.error
        return line
    if isinstance(item, RetryScheduled):
        return {
            "type": "retry",
            "retry": item.retry,
            "delayMs": item.delay_ms,
            "code": item.code,
            "message": item.message,
        }
    return None
