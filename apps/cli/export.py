"""`dsh export`: a session as one self-contained HTML page, or as JSONL lines.

The page needs nothing but itself (inline CSS, no script, no font, no image, no link out): the
session's header and token usage, then each turn with its steps, messages, tool calls and
results; checkpoint barriers marked ◆ when the manifest mounts a policy, crash repairs (written
or still pending) highlighted and the crash point, where the process stopped, marked. The JSONL
form is the stored log in the on-disk envelope: the header line, then one event per line
(docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from html import escape
from typing import Any

from plugins.session.jsonutil import dumps, parse_arguments
from plugins.session.repair import repair_code
from plugins.session_persistence.header import stored_header

from .clock import stamp
from .summary import (
    message_text,
    reason_text,
    tool_result_is_error,
    tool_result_text,
)
from .timeline import LEGEND, NO_POLICY
from .transcript import usage_of

Event = dict[str, Any]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:60em;color:#1d1d1f;
background:#fafafa}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:0}
.facts,.legend{color:#555;margin:.2em 0}
.turn{background:#fff;border:1px solid #ddd;border-radius:6px;margin:1em 0;padding:.6em 1em}
.turn.interrupted{border-color:#d97706}
.step{border-left:3px solid #c4b5fd;margin:.5em 0;padding-left:.8em}
.event{margin:.25em 0;white-space:pre-wrap;word-break:break-word}
.seq{color:#999;font:12px monospace;margin-right:.5em}
.user{color:#0b4f9c}.assistant{color:#1d1d1f}.reasoning{color:#777;font-style:italic}
.barrier::before{content:"\\25C6 ";color:#7c3aed}
.tool-call{color:#5b21b6}.tool-result.ok{color:#166534}.tool-result.error{color:#b91c1c}
.repair{background:#fef3c7;border:1px solid #d97706;border-radius:4px;padding:.2em .4em}
.pending::after{content:" [pending repair: not written yet]";color:#b45309;font-weight:bold}
#crash-point{background:#fee2e2;border:2px solid #dc2626;border-radius:4px;color:#991b1b;
font-weight:bold;margin:.5em 0;padding:.3em .6em}
.other{color:#666;font-size:12px}
table.usage{border-collapse:collapse;margin:.4em 0}
table.usage td,table.usage th{border:1px solid #ddd;padding:.1em .6em;text-align:right}
"""


def jsonl_lines(header: Mapping[str, Any], events: Sequence[Event]) -> Iterator[str]:
    """The header line in the on-disk key order, then each event's JSON text."""
    yield dumps(stored_header(dict(header)))
    for event in events:
        yield dumps(event)


def _is_repair(event: Event) -> bool:
    if repair_code(event) is not None:
        return True
    return event["type"] == "turn/end" and bool(
        event["data"]["reason"].get("kind") == "interrupted"
    )


def crash_point(events: Sequence[Event]) -> int | None:
    """The index of the first repair closer (the crash happened just before it), or None."""
    return next((i for i, event in enumerate(events) if _is_repair(event)), None)


def _row(event: Event, css: str, body: str, stored: int) -> str:
    classes = f"event {css}"
    if _is_repair(event):
        classes += " repair"
    if event["seq"] >= stored:
        classes += " pending"
    return (
        f'<div class="{classes}" data-seq="{event["seq"]}" data-type="{escape(event["type"])}">'
        f'<span class="seq">#{event["seq"]}</span>{body}</div>'
    )


def _body(event: Event, names: dict[str, str]) -> tuple[str, str] | None:
    """`(css class, escaped html)` of one event; None for events the page leaves out."""
    kind, data = event["type"], event["data"]
    if kind == "user/message":
        return "user", "<b>user:</b> " + escape(message_text(data))
    if kind == "assistant/message":
        message = data["message"]
        parts = []
        source = message.get("source", {})
        model = f"{source.get('provider')}/{source.get('model')}"
        parts.append(f"<b>assistant</b> ({escape(model)})")
        reasoning = message_text(message, "reasoning")
        if reasoning:
            parts.append(f'<div class="reasoning">thinking: {escape(reasoning)}</div>')
        text = message_text(message)
        if text:
            parts.append(f"<div>{escape(text)}</div>")
        for block in message.get("content", ()):
            if block.get("type") == "tool-call":
                names[str(block.get("id"))] = str(block.get("name"))
                parts.append(
                    f'<div class="tool-call">asks for {escape(str(block.get("name")))} '
                    f"{escape(dumps(parse_arguments(block.get('arguments', ''))))}</div>"
                )
        if data.get("interrupted"):
            parts.append("<div>(response interrupted)</div>")
        return "assistant barrier", "".join(parts)
    if kind == "tool/call":
        names[str(data["callId"])] = str(data["name"])
        return "tool-call barrier", (
            f"<b>tool call started:</b> {escape(data['name'])} "
            f"{escape(dumps(parse_arguments(data['arguments'])))} "
            f'<span class="other">({escape(data["callId"])})</span>'
        )
    if kind == "tool/result":
        message = data["message"]
        call_id = str(message["source"]["callId"])
        name = escape(names.get(call_id, call_id))
        code = repair_code(event)
        if code is not None:
            return "tool-result error", f"<b>{name}: crash repair {escape(code)}</b> — " + escape(
                tool_result_text(message)
            )
        ok = "error" if tool_result_is_error(message) else "ok"
        return f"tool-result {ok}", f"<b>{name} → {ok}:</b> " + escape(tool_result_text(message))
    if kind == "step/start":
        return "step-start barrier", f"step {data['step']}"
    if kind == "request/header":
        config = data["header"]["config"]
        model = f"{config.get('provider')}/{config.get('model')}"
        return "other", f"request header {escape(model)} ({escape(str(data.get('reason')))})"
    if kind == "agent/inbox/spliced":
        count = len(data.get("inserted", ()))
        return "other", f"inbox: {count} message(s) queued for the {escape(data['target'])}"
    if kind in ("turn/start", "turn/end", "step/end", "assistant/chunk"):
        return None
    return "other", escape(kind) + " " + escape(dumps(data)[:300])


def _usage_table(events: Sequence[Event]) -> str:
    usage = usage_of(events)
    if not usage.turns:
        return ""
    rows = "".join(
        f"<tr><td>{turn}</td><td>{c.get('inputTokens', 0)}</td>"
        f"<td>{c.get('outputTokens', 0)}</td></tr>"
        for turn, c in usage.turns.items()
    )
    total = usage.total
    rows += (
        f"<tr><th>total</th><th>{total.get('inputTokens', 0)}</th>"
        f"<th>{total.get('outputTokens', 0)}</th></tr>"
    )
    return (
        '<table class="usage"><tr><th>turn</th><th>input tokens</th><th>output tokens</th></tr>'
        f"{rows}</table>"
    )


def html_page(
    header: Mapping[str, Any], events: Sequence[Event], stored: int, policy: str | None
) -> str:
    """The page for a session's balanced `events` of which the first `stored` are written;
    `policy` is the row name of the checkpoint policy the manifest mounts (None: no ◆ marks,
    as in `dsh show`)."""
    session_id = str(header["id"])
    facts = [f"created {stamp(header['createdAt'])}", f"{len(events)} events"]
    if header.get("cwd"):
        facts.append(f"cwd {header['cwd']}")
    if header.get("parentSession"):
        facts.append(f"forked from {header['parentSession']} at seq {header['seedLength'] - 1}")
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>dsh session {escape(session_id)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<h1 id="session">session {escape(session_id)}</h1>',
        f'<p class="facts">{escape(" · ".join(facts))}</p>',
        f'<p class="legend">{escape(_legend(policy))}. Highlighted: crash repairs.</p>',
        _usage_table(events),
    ]
    crash = crash_point(events)
    names: dict[str, str] = {}
    in_turn = in_step = False
    for index, event in enumerate(events):
        kind, data = event["type"], event["data"]
        if index == crash:
            before = events[index - 1]["seq"] if index else -1
            out.append(
                f'<div id="crash-point">⚡ crash point: the process stopped after seq {before};'
                " the highlighted events below close what it left open</div>"
            )
        if kind == "turn/start":
            reason = _turn_reason(events, index, data["turn"])
            css = "turn interrupted" if reason == "interrupted" else "turn"
            out.append(
                f'<section class="{css}" id="turn-{data["turn"]}">'
                f"<h2>turn {data['turn']} — {escape(reason)}</h2>"
            )
            in_turn = True
            continue
        if kind == "step/start":
            out.append(f'<div class="step" id="turn-{data["turn"]}-step-{data["step"]}">')
            in_step = True
        body = _body(event, names)
        if body is not None:
            css = body[0] if policy is not None else body[0].removesuffix(" barrier")
            out.append(_row(event, css, body[1], stored))
        if kind == "turn/end" and _is_repair(event):
            out.append(_row(event, "other", "turn closed as interrupted", stored))
        if kind in ("step/end", "turn/end") and in_step:
            out.append("</div>")
            in_step = False
        if kind == "turn/end" and in_turn:
            out.append("</section>")
            in_turn = False
    out += ["</div>"] * in_step + ["</section>"] * in_turn + ["</body></html>"]
    return "\n".join(part for part in out if part)


def _legend(policy: str | None) -> str:
    return NO_POLICY if policy is None else LEGEND.format(policy=policy)


def _turn_reason(events: Sequence[Event], start: int, turn: int) -> str:
    for event in events[start:]:
        if event["type"] == "turn/end" and event["data"]["turn"] == turn:
            return reason_text(event["data"]["reason"])
    return "open"
