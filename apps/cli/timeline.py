"""`dsh show`: a session's timeline for a person.

Turns, steps, messages, tool calls and results; when the manifest mounts the checkpoint policy,
◆ marks its barriers (a step start, a model request, a tool call made durable before its body
runs; see docs/cli.md); crash repairs
(interrupted turns, tool calls with unknown outcome or never started) are highlighted, and
those not yet written (the log is balanced in memory by inspect) are marked pending.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from rich.text import Text

from framework.manifest import Manifest
from plugins.session.jsonutil import dumps, parse_arguments
from plugins.session.repair import NOT_STARTED, UNKNOWN_OUTCOME, repair_code
from plugins.session_persistence import Owner, SessionLog

from .clock import stamp
from .summary import (
    message_text,
    reason_text,
    short,
    tool_result_is_error,
    tool_result_text,
)

Event = Mapping[str, Any]

#: How `dsh show` marks each approval outcome.
APPROVAL_MARKS = {
    "allowed-once": ("✓", "green"),
    "rejected": ("✗", "red"),
    "unavailable": ("✗", "red"),
    "cancelled": ("⚠", "bold yellow"),
}

LEGEND = (
    "◆ checkpoint barrier of {policy}: the events above it were durable on disk "
    "before what follows it ran"
)
NO_POLICY = (
    "no ◆ marks: this manifest mounts no checkpoint policy, so events are written behind "
    "and only a run's end is flushed (a crash may lose the latest events)"
)


def clock(ms: int) -> str:
    """Local `HH:MM:SS` of an epoch-ms time."""
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def storage_notes(log: SessionLog, owner: Owner | None, path: str | None) -> Iterator[Text]:
    """What `show` says beside the events: another process running the session, bytes repairs
    set aside beside the log, and a torn tail the next repair will set aside."""
    if owner is not None:
        pid = "unknown" if owner.pid is None else str(owner.pid)
        yield Text(
            f"● running in pid {pid} on host {owner.host or 'unknown'}: below is what it has "
            "made durable so far",
            style="bold green",
        )
    for kept in log.set_aside:
        yield Text(f"set aside by a repair: {kept.size} bytes in {kept.path}", style="yellow")
    if log.torn_bytes:
        where = f" in {path}.torn-<ms>" if path else ""
        yield Text(
            f"⚠ the log ends in a torn tail of {log.torn_bytes} bytes: the next repair "
            f"(dsh resume {log.header['id']}) cuts it and keeps it beside the log{where}",
            style="bold yellow",
        )


def _indented(prefix: str, text: str, indent: str, style: str = "") -> Text:
    lines = text.rstrip("\n").split("\n") or [""]
    out = Text(indent)
    out.append(prefix, style="bold")
    out.append(lines[0], style=style)
    for line in lines[1:]:
        out.append("\n" + indent + " " * len(prefix) + line, style=style)
    return out


class Timeline:
    """Renders events to rich `Text` lines; `stored` = how many of them are on disk."""

    def __init__(self, events: Sequence[Event], stored: int, policy: str | None) -> None:
        """`policy`: the row name of the checkpoint policy the manifest mounts (None: none, so
        no barrier is drawn)."""
        self.events = events
        self.stored = stored
        self.policy = policy
        self.mark = "◆ " if policy is not None else ""
        self.names: dict[str, str] = {}
        self.turn_started: dict[int, int] = {}
        self.questions: dict[str, str] = {}

    def header(self, header: Mapping[str, Any]) -> Iterator[Text]:
        line = Text.assemble(("session ", "dim"), (str(header["id"]), "bold cyan"))
        line.append(f"  created {stamp(header['createdAt'])}", style="dim")
        if header.get("cwd"):
            line.append(f"  cwd {header['cwd']}", style="dim")
        line.append(f"  {len(self.events)} events", style="dim")
        yield line
        if header.get("parentSession"):
            yield Text(f"forked from {header['parentSession']}", style="dim")
        legend = NO_POLICY if self.policy is None else LEGEND.format(policy=self.policy)
        yield Text(legend, style="dim")
        pending = len(self.events) - self.stored
        if pending > 0:
            yield Text(
                f"⚠ the log ends inside a turn: {pending} repair event(s) below are not written "
                f"yet (dsh resume {shlex.quote(str(header['id']))} writes them)",
                style="bold yellow",
            )

    def lines(self) -> Iterator[Text]:
        for event in self.events:
            yield from self.render(event)

    def _pending(self, event: Event) -> str:
        return "  [pending repair]" if event["seq"] >= self.stored else ""

    def render(self, event: Event) -> Iterator[Text]:
        kind = event["type"]
        data = event["data"]
        if kind == "turn/start":
            self.turn_started[data["turn"]] = event["time"]
            yield Text.assemble(
                ("▶ turn ", "bold"),
                (str(data["turn"]), "bold"),
                (f"  {clock(event['time'])}", "dim"),
            )
        elif kind == "turn/end":
            yield self._turn_end(event)
        elif kind == "step/start":
            yield Text.assemble((f"  {self.mark}step ", "magenta"), (str(data["step"]), "magenta"))
        elif kind == "user/message":
            source = data.get("source", {})
            who = "you: " if source.get("kind") == "user" else f"{source.get('plugin')}: "
            yield _indented(who, message_text(data), "    ")
        elif kind == "request/header":
            config = data["header"]["config"]
            yield Text(
                f"    request header {config.get('provider')}/{config.get('model')} "
                f"({data.get('reason')})",
                style="dim",
            )
        elif kind == "assistant/message":
            yield from self._assistant(data)
        elif kind == "tool/call":
            self.names[data["callId"]] = data["name"]
            args = short(dumps(parse_arguments(data["arguments"])), 120)
            yield Text.assemble(
                (f"    {self.mark}→ ", "magenta"),
                (data["name"], "bold"),
                " ",
                (args, "dim"),
                (f"  ({data['callId']})", "dim"),
            )
        elif kind == "tool/result":
            yield self._tool_result(event)
        elif kind == "llm/retry":
            failure = data.get("failure", {})
            yield Text(
                f"    retry {data.get('retry')} after {data.get('delayMs')} ms: "
                f"{failure.get('message')} ({failure.get('code')})",
                style="yellow",
            )
        elif kind == "session/title":
            yield Text(f"  title: {data.get('title')}", style="dim")
        elif kind.startswith("approval/"):
            yield from self._approval(event)

    def _approval(self, event: Event) -> Iterator[Text]:
        """An asked/decided pair, a remembered "always", a policy change (docs/approval.md)."""
        kind, data = event["type"], event["data"]
        if kind == "approval/asked":
            self.questions[data["id"]] = data["toolName"]
            reason = f": {data['reason']}" if data.get("reason") else ""
            yield Text.assemble(
                ("      ? ", "bold yellow"),
                (data["toolName"], "bold"),
                (f" asks for approval{reason}", "yellow"),
                (f"  ({data['id']})", "dim"),
            )
        elif kind == "approval/decided":
            name = self.questions.get(data["id"], data["id"])
            outcome = data.get("outcome")
            mark, style = APPROVAL_MARKS.get(outcome, ("?", "yellow"))
            yield Text.assemble(
                (f"      {mark} ", style),
                (name, "bold"),
                (f" approval: {outcome}", style),
                (self._pending(event), style),
            )
        elif kind == "approval/always":
            yield Text(f"      ✓ {data.get('toolName')} always allowed in this session", "green")
        elif kind == "approval/policy":
            yield Text(f"  approval policy: {data.get('policy')}", style="dim")

    def _assistant(self, data: Mapping[str, Any]) -> Iterator[Text]:
        message = data["message"]
        source = message.get("source", {})
        for block in message.get("content", ()):
            if block.get("type") == "tool-call":
                self.names[block["id"]] = block["name"]
        yield Text(
            f"    {self.mark}request → {source.get('provider')}/{source.get('model')}",
            style="magenta",
        )
        reasoning = message_text(message, "reasoning")
        if reasoning:
            yield _indented("thinking: ", short(reasoning, 200), "    ", "dim italic")
        text = message_text(message)
        if text:
            yield _indented("assistant: ", text, "    ")
        if data.get("interrupted"):
            yield Text("    (response interrupted)", style="yellow")

    def _tool_result(self, event: Event) -> Text:
        message = event["data"]["message"]
        call_id = message["source"]["callId"]
        name = self.names.get(call_id, call_id)
        code = repair_code(event)
        if code == UNKNOWN_OUTCOME:
            return Text.assemble(
                ("      ⚠ ", "bold yellow"),
                (name, "bold"),
                (": outcome UNKNOWN (crash repair) — verify before retrying", "bold yellow"),
                (self._pending(event), "yellow"),
            )
        if code == NOT_STARTED:
            return Text.assemble(
                ("      ⚠ ", "bold yellow"),
                (name, "bold"),
                (": not started (crash repair)", "bold yellow"),
                (self._pending(event), "yellow"),
            )
        text = short(tool_result_text(message), 160)
        if tool_result_is_error(message):
            return Text.assemble(("      ✗ ", "red"), (name, "bold"), ": ", (text, "red"))
        return Text.assemble(("      ✓ ", "green"), (name, "bold"), ": ", (text, "dim"))

    def _turn_end(self, event: Event) -> Text:
        data = event["data"]
        reason = data["reason"]
        kind = reason.get("kind")
        started = self.turn_started.get(data["turn"])
        took = f"  ({(event['time'] - started) / 1000:.1f}s)" if started is not None else ""
        label = f"■ turn {data['turn']} "
        if kind == "interrupted":
            return Text.assemble(
                (label + "INTERRUPTED (crash repair)", "bold red"), (self._pending(event), "red")
            )
        style = "green" if kind == "completed" else "yellow" if kind == "aborted" else "red"
        return Text.assemble((label + reason_text(reason), style), (took, "dim"))


#: The checkpoint policies whose barriers `dsh show` draws: the seed's and its strict variant.
POLICY_MODULES = frozenset(
    {"plugins.session_checkpoint_policy", "plugins.session_checkpoint_policy.strict"}
)


def checkpoint_policy(manifest: Manifest, plugins: Mapping[str, object]) -> str | None:
    """The row name of the checkpoint policy (the seed's or its strict variant) among a
    manifest's enabled rows and their resolved plugins (what a boot resolved: `boot(...,
    resolved=...)`), or None: `dsh show` draws barriers only then."""
    # The policies' modules are told by name: importing the strict one would import the
    # barriers' model and tool machinery (docs/performance.md, "Start-up (P11)").
    for entry in manifest.walk(enabled_only=True):
        plugin = plugins.get(entry.id)
        if isinstance(plugin, ModuleType) and plugin.__name__ in POLICY_MODULES:
            return entry.name
    return None


class MountedPolicy:
    """Passed as a boot's `resolved`: keeps `checkpoint_policy` of what the boot resolved, so
    the manifest is read once."""

    def __init__(self) -> None:
        self.name: str | None = None

    def __call__(self, manifest: Manifest, plugins: Mapping[str, object]) -> None:
        self.name = checkpoint_policy(manifest, plugins)
