"""How `dsh run` shows a turn as it happens: for a person (rich) or as JSON lines."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from rich.console import Console
from rich.status import Status
from rich.text import Text

from plugins.session.jsonutil import dumps, loads

from .console import Consoles
from .summary import (
    NOT_STARTED,
    UNKNOWN_OUTCOME,
    Repairs,
    reason_text,
    repair_code,
    tool_result_is_error,
    tool_result_text,
)

Event = Mapping[str, Any]


class RunView(Protocol):
    """Receives the live events of the session `dsh run` drives."""

    def started(self, session_id: str, *, resumed: bool, repairs: Repairs) -> None:
        """The agent is ready (a new or a resumed session, with what its load repaired)."""

    def event(self, event: Event) -> None:
        """One event appended to the live session."""

    def notice(self, text: str) -> None:
        """A remark for the person at the keyboard (e.g. "cancelling the turn")."""

    def finished(
        self, session_id: str, reason: Mapping[str, Any], output: str, *, stored: bool
    ) -> None:
        """The turn ended with `reason`; `output` is its last assistant text; `stored` says
        whether the session is on disk (so it can be resumed)."""

    def close(self) -> None:
        """Stop anything still animated."""


def short(text: str, limit: int = 160) -> str:
    """One line of at most `limit` characters."""
    flat = text.replace("\r", "").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_arguments(raw: Any) -> Any:
    """A tool call's raw JSON arguments as a value (the raw string when it is not JSON)."""
    if not isinstance(raw, str):
        return raw
    try:
        return loads(raw) if raw else {}
    except ValueError:
        return raw


class HumanView:
    """Streams text to `out`; tool calls, results, reasoning and the outcome to `deco`."""

    def __init__(self, consoles: Consoles) -> None:
        self.out = consoles.out
        self.deco = consoles.deco
        self.animate = consoles.interactive
        self._status: Status | None = None
        self._open: Console | None = None  # the console holding an unfinished line
        self._names: dict[str, str] = {}

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

    def started(self, session_id: str, *, resumed: bool, repairs: Repairs) -> None:
        line = Text.assemble(("session ", "dim"), (session_id, "bold cyan"))
        if resumed:
            line.append(" (resumed)", style="dim")
        self._line(line)
        if repairs:
            self._line(Text(f"recovered: {repairs.describe()}", style="yellow"))

    def event(self, event: Event) -> None:
        kind = event["type"]
        data = event["data"]
        if kind == "step/start":
            self._spin("waiting for the model…")
        elif kind == "assistant/chunk":
            chunk = data["chunk"]
            if chunk["type"] == "text-delta":
                self._write(self.out, chunk["text"])
            elif chunk["type"] == "reasoning-delta":
                self._write(self.deco, chunk["text"], "dim italic")
            elif chunk["type"] == "block-end":
                self._end_line()
            elif chunk["type"] == "block-start" and chunk["blockType"] == "tool-call":
                self._spin("the model is writing a tool call…")
        elif kind == "assistant/message":
            self._end_line()
            if data.get("interrupted"):
                self._line(Text("(response interrupted)", style="yellow"))
        elif kind == "tool/call":
            self._names[data["callId"]] = data["name"]
            args = short(dumps(parse_arguments(data["arguments"])))
            self._line(Text.assemble(("→ ", "cyan"), (data["name"], "bold"), " ", (args, "dim")))
            self._spin(f"running {data['name']}…")
        elif kind == "tool/result":
            self._tool_result(event)
        elif kind == "llm/retry":
            failure = data["failure"]
            self._line(
                Text(
                    f"retry {data['retry']} in {data['delayMs']} ms: "
                    f"{failure.get('message')} ({failure.get('code')})",
                    style="yellow",
                )
            )
            self._spin("waiting to retry…")
        elif kind == "turn/end":
            self._still()
            self._end_line()

    def _tool_result(self, event: Event) -> None:
        data = event["data"]
        message = data["message"]
        call_id = message["source"]["callId"]
        name = self._names.get(call_id, call_id)
        text = short(tool_result_text(message))
        code = repair_code(event)
        if code == UNKNOWN_OUTCOME:
            line = Text.assemble(("⚠ ", "yellow"), (name, "bold"), (": outcome unknown", "yellow"))
        elif code == NOT_STARTED:
            line = Text.assemble(("⚠ ", "yellow"), (name, "bold"), (": not started", "yellow"))
        elif tool_result_is_error(message):
            line = Text.assemble(("✗ ", "red"), (name, "bold"), ": ", (text, "red"))
        else:
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


#: `--json` line types of the streamed deltas.
_DELTAS = {"text-delta": "text", "reasoning-delta": "reasoning"}


def tool_result_value(message: Mapping[str, Any]) -> Any:
    """A tool result as a value: its text parsed as JSON when it is JSON (a tool returning a
    mapping or a list stores it as JSON text), the text otherwise."""
    text = tool_result_text(message)
    try:
        return loads(text)
    except ValueError:
        return text


class JsonView:
    """One JSON object per line on stdout: `text`, `tool-call`, `tool-result`, then `result`."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    @staticmethod
    def _emit(value: dict[str, Any]) -> None:
        sys.stdout.write(dumps(value) + "\n")
        sys.stdout.flush()

    def started(self, session_id: str, *, resumed: bool, repairs: Repairs) -> None:
        line: dict[str, Any] = {"type": "session", "sessionId": session_id, "resumed": resumed}
        if resumed:
            line["recovered"] = repairs.to_json()
        self._emit(line)
        if repairs:
            print(f"dsh: recovered: {repairs.describe()}", file=sys.stderr)

    def event(self, event: Event) -> None:
        kind = event["type"]
        data = event["data"]
        if kind == "assistant/chunk" and data["chunk"]["type"] in _DELTAS:
            chunk = data["chunk"]
            self._emit({"type": _DELTAS[chunk["type"]], "text": chunk["text"]})
        elif kind == "tool/call":
            self._names[data["callId"]] = data["name"]
            self._emit(
                {
                    "type": "tool-call",
                    "callId": data["callId"],
                    "name": data["name"],
                    "arguments": parse_arguments(data["arguments"]),
                }
            )
        elif kind == "tool/result":
            message = data["message"]
            call_id = message["source"]["callId"]
            line: dict[str, Any] = {
                "type": "tool-result",
                "callId": call_id,
                "name": self._names.get(call_id),
                "isError": tool_result_is_error(message),
                "value": tool_result_value(message),
            }
            if "error" in data:
                line["error"] = data["error"]
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
