"""The session event model: known types, envelopes in on-disk key order, and validation.

An event is a plain `dict` whose key order is the on-disk order (docs/event-log.md):

- live append: `type, seq, time, data, ignorable?, sourceEventSeqs?, surfaceOp?`
- repair closer: `type, seq, time, data, surfaceOp, sourceEventSeqs?`

`ignorable` never appears on events this harness writes itself (no producer sets it); when a
caller does set it, it goes right after `data`, the position the original's object spread gives
it. Loaded events keep whatever order they were read in.

Validation is split in two: `check_event` checks one envelope in isolation, `Surface` checks the
surface operations against the current model-visible surface and tracks it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .eventlog import plain_events
from .jsonutil import MAX_SAFE_INTEGER

__all__ = [
    "ENVELOPE_KEYS",
    "HEADER_KEYS",
    "KNOWN_EVENT_TYPES",
    "SURFACE_TYPES",
    "Event",
    "EventFormatError",
    "LogValidator",
    "Surface",
    "UnknownEventTypeError",
    "UnsupportedVersionError",
    "check_appended",
    "check_event",
    "closer_event",
    "live_event",
    "make_header",
    "validate_header",
    "validate_log",
]

Event = dict[str, Any]

#: The original harness's 48 event types; every one of them loads.
KNOWN_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/result",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)

#: Types that carry a model-visible message and therefore a `surfaceOp`.
SURFACE_TYPES: frozenset[str] = frozenset({"user/message", "assistant/message", "tool/result"})

ENVELOPE_KEYS: frozenset[str] = frozenset(
    {"type", "seq", "time", "data", "ignorable", "surfaceOp", "sourceEventSeqs"}
)

#: Header keys in their canonical order.
HEADER_KEYS: tuple[str, ...] = (
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
)

_RETIRED_TYPES = {"request/header-delta": "it was retired; request/header replaces it"}
_REQUEST_HEADER_REASONS = ("initial", "resume", "change")


class EventFormatError(ValueError):
    """Raised when an event, a header or a log breaks the on-disk format (docs/event-log.md)."""


class UnknownEventTypeError(EventFormatError):
    """Raised for an event type this harness does not know that is not marked ignorable."""

    def __init__(self, event_type: str, seq: int) -> None:
        self.event_type = event_type
        self.seq = seq
        super().__init__(
            f'event type "{event_type}" (seq {seq}) is unknown and not marked ignorable'
        )


class UnsupportedVersionError(EventFormatError):
    """Raised when a header's `version` is not 0, the only log format this build reads."""

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(f"session log format v{version} is not supported (this build reads v0)")


def live_event(
    event_type: str,
    seq: int,
    time: int,
    data: Any,
    *,
    ignorable: bool = False,
    source_event_seqs: list[int] | None = None,
    surface_op: str | dict[str, Any] | None = None,
) -> Event:
    """An event as `Session.append` writes it: `type, seq, time, data, [ignorable,]
    [sourceEventSeqs,] [surfaceOp]`."""
    event: Event = {"type": event_type, "seq": seq, "time": time, "data": data}
    if ignorable:
        event["ignorable"] = True
    if source_event_seqs is not None:
        event["sourceEventSeqs"] = source_event_seqs
    if surface_op is not None:
        event["surfaceOp"] = surface_op
    return event


def closer_event(
    event_type: str,
    seq: int,
    time: int,
    data: Any,
    *,
    surface_op: str | dict[str, Any] | None = None,
    source_event_seqs: list[int] | None = None,
) -> Event:
    """An event as crash repair writes it: `type, seq, time, data, [surfaceOp,]
    [sourceEventSeqs]`."""
    event: Event = {"type": event_type, "seq": seq, "time": time, "data": data}
    if surface_op is not None:
        event["surfaceOp"] = surface_op
    if source_event_seqs is not None:
        event["sourceEventSeqs"] = source_event_seqs
    return event


def _is_int(value: object) -> bool:
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def check_event(event: Any, expected_seq: int) -> None:
    """Validate one envelope on its own (keys, types, known type, retired shapes, surface
    fields and surface payloads). Raises `EventFormatError`; `UnknownEventTypeError` for an
    unknown type that is not ignorable."""
    if type(event) is not dict:
        raise EventFormatError(f"event at seq {expected_seq} is not a JSON object")
    if not ENVELOPE_KEYS.issuperset(event):
        extra = event.keys() - ENVELOPE_KEYS
        names = ", ".join(f'"{k}"' for k in sorted(extra))
        raise EventFormatError(f"event at seq {expected_seq} has unknown key(s) {names}")
    seq = event.get("seq")
    if seq != expected_seq or type(seq) is not int:
        if not _is_count(seq):
            raise EventFormatError(f"event at index {expected_seq} has no valid seq: {seq!r}")
        raise EventFormatError(f"event seq {seq} is not contiguous: expected seq {expected_seq}")
    event_type = event.get("type")
    if type(event_type) is not str or not event_type:
        raise EventFormatError(f"event at seq {seq} has no valid type: {event_type!r}")
    time = event.get("time")
    if type(time) is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER:
        raise EventFormatError(
            f'event "{event_type}" (seq {seq}) time must be an integer epoch in ms, got {time!r}'
        )
    if "data" not in event:
        raise EventFormatError(f'event "{event_type}" (seq {seq}) has no data')
    ignorable = event.get("ignorable")
    if ignorable is not None and ignorable is not True:
        raise EventFormatError(
            f'event "{event_type}" (seq {seq}) ignorable must be true or absent, got {ignorable!r}'
        )
    check_appended(event)


def check_appended(event: Event) -> None:
    """The part of `check_event` after the keys, seq, data and `ignorable`: the type and time,
    then what the type requires (known or ignorable, not retired, surface fields and payloads,
    a request/header's data). `Session.append` calls it alone: `live_event` builds the rest
    right, and only the caller's type and the clock's time can be wrong."""
    event_type = event["type"]
    seq = event["seq"]
    time = event["time"]
    if (
        type(event_type) is not str
        or not event_type
        or type(time) is not int
        or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
    ):
        # Raises: `check_event` refuses such a type or time before it calls this function.
        check_event(event, seq)
    ignorable = event.get("ignorable")
    if event_type in _RETIRED_TYPES:
        raise EventFormatError(
            f'event type "{event_type}" (seq {seq}) is refused: {_RETIRED_TYPES[event_type]}'
        )
    if event_type not in KNOWN_EVENT_TYPES and ignorable is not True:
        raise UnknownEventTypeError(event_type, seq)
    if event_type in SURFACE_TYPES:
        _check_surface_fields(event, event_type, seq)
        _check_surface_payload(event["data"], event_type, seq)
    elif "surfaceOp" in event or "sourceEventSeqs" in event:
        raise EventFormatError(
            f'event "{event_type}" (seq {seq}) is not a surface event and cannot carry '
            "surfaceOp or sourceEventSeqs"
        )
    elif event_type == "request/header":
        _check_request_header(event["data"], seq)


def _check_surface_fields(event: Event, event_type: str, seq: int) -> None:
    where = f'event "{event_type}" (seq {seq})'
    op = event.get("surfaceOp")
    if op is None:
        raise EventFormatError(f"{where} must carry a surfaceOp")
    if op != "append" and (
        type(op) is not dict
        or op.keys() != {"op", "start", "end"}
        or op["op"] != "replace"
        or not _is_count(op["start"])
        or not _is_count(op["end"])
    ):
        raise EventFormatError(
            f'{where} surfaceOp must be "append" or '
            f'{{"op":"replace","start":<seq>,"end":<seq>}}, got {op!r}'
        )
    if "sourceEventSeqs" in event:
        seqs = event["sourceEventSeqs"]
        if type(seqs) is not list or not all(_is_count(s) and s < seq for s in seqs):
            raise EventFormatError(
                f"{where} sourceEventSeqs must be a list of earlier seqs, got {seqs!r}"
            )
        if len(set(seqs)) != len(seqs):
            raise EventFormatError(f"{where} sourceEventSeqs must be distinct, got {seqs!r}")
        if not seqs and event_type != "assistant/message":
            raise EventFormatError(
                f"{where} sourceEventSeqs may be empty only on assistant/message"
            )


def _check_message(message: Any, role: str, where: str) -> dict[str, Any]:
    """Check the common message shape and return the message."""
    if type(message) is not dict:
        raise EventFormatError(f"{where} message must be a JSON object")
    if message.get("role") != role:
        raise EventFormatError(
            f'{where} message role must be "{role}", got {message.get("role")!r}'
        )
    if type(message.get("id")) is not str:
        raise EventFormatError(f"{where} message id must be a string")
    if type(message.get("content")) is not list:
        raise EventFormatError(f"{where} message content must be a list of blocks")
    source = message.get("source")
    if type(source) is not dict or type(source.get("kind")) is not str:
        raise EventFormatError(f"{where} message source must be an object with a kind")
    return message


def _check_surface_payload(data: Any, event_type: str, seq: int) -> None:
    where = f'event "{event_type}" (seq {seq})'
    if event_type == "user/message":
        _check_message(data, "user", where)
        return
    if type(data) is not dict:
        raise EventFormatError(f"{where} data must be a JSON object")
    if event_type == "assistant/message":
        _check_message(data.get("message"), "assistant", where)
        return
    message = _check_message(data.get("message"), "user", where)
    source = message["source"]
    call_id = source.get("callId")
    if source["kind"] != "tool" or type(call_id) is not str:
        raise EventFormatError(f'{where} message source must be {{"kind":"tool","callId":<id>}}')
    blocks = message["content"]
    if (
        len(blocks) != 1
        or type(blocks[0]) is not dict
        or blocks[0].get("type") != "tool-result"
        or blocks[0].get("toolCallId") != call_id
    ):
        raise EventFormatError(
            f'{where} message must hold exactly one tool-result block for call "{call_id}"'
        )


def _check_request_header(data: Any, seq: int) -> None:
    where = f'event "request/header" (seq {seq})'
    if type(data) is not dict or type(data.get("header")) is not dict:
        raise EventFormatError(f"{where} data must be an object with a header")
    reason = data.get("reason")
    if reason == "fallback":
        raise EventFormatError(f'{where} reason "fallback" is retired and refused')
    if reason not in _REQUEST_HEADER_REASONS:
        raise EventFormatError(
            f'{where} reason must be "initial", "resume" or "change", got {reason!r}'
        )


class Surface:
    """The model-visible surface: the ordered seqs of the surface events currently shown.

    `check(event, events)` validates an event's surface operation against the current surface
    (without changing it); `apply(event)` then records it.
    """

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: list[int] = []

    def check(self, event: Event, events: Sequence[Event]) -> None:
        """Validate `event`'s surfaceOp (a no-op for non-surface events)."""
        op = event.get("surfaceOp")
        if op is None or op == "append":
            return
        where = f'event "{event["type"]}" (seq {event["seq"]})'
        start, end = op["start"], op["end"]
        try:
            first = self.nodes.index(start)
            last = self.nodes.index(end)
        except ValueError:
            raise EventFormatError(
                f"{where} replaces surface range {start}..{end}, but "
                f"{start if start not in self.nodes else end} is not on the surface"
            ) from None
        if first > last:
            raise EventFormatError(
                f"{where} replaces surface range {start}..{end}, which ends before it starts"
            )
        shadowed = self.nodes[first : last + 1]
        cited = event.get("sourceEventSeqs")
        missing = [s for s in shadowed if cited is None or s not in cited]
        if missing:
            raise EventFormatError(
                f"{where} must cite every shadowed surface node in sourceEventSeqs "
                f"(missing {missing})"
            )
        if event["type"] == "tool/result":
            target = events[start]
            if start != end or target["type"] != "tool/result":
                raise EventFormatError(
                    f"{where} may only replace a single tool/result surface node"
                )
            if _without_inner_content(event["data"]["message"]) != _without_inner_content(
                target["data"]["message"]
            ):
                raise EventFormatError(
                    f"{where} may only rewrite the inner content of tool/result seq {start}"
                )

    def apply(self, event: Event) -> None:
        """Record a (checked) event on the surface."""
        op = event.get("surfaceOp")
        if op is None:
            return
        if op == "append":
            self.nodes.append(event["seq"])
            return
        first = self.nodes.index(op["start"])
        last = self.nodes.index(op["end"])
        self.nodes[first : last + 1] = [event["seq"]]


def _without_inner_content(message: Mapping[str, Any]) -> dict[str, Any]:
    block = {k: v for k, v in message["content"][0].items() if k != "content"}
    return {**message, "content": [block]}


def make_header(session_id: str, created_at: int, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A v0 header in canonical key order from `meta` (header fields except version/id)."""
    header: dict[str, Any] = {"version": 0, "id": session_id, "createdAt": created_at}
    for key in HEADER_KEYS[3:]:
        if key in meta:
            header[key] = meta[key]
    return header


def validate_header(header: Any) -> None:
    """Validate a session header: `{version:0, id, createdAt, cwd?, parentSession?,
    seedLength?, origin?:"subagent", delegationDepth?, agentPreset?}`."""
    if type(header) is not dict:
        raise EventFormatError("session header must be a JSON object")
    if header.get("version") != 0 or type(header.get("version")) is not int:
        raise UnsupportedVersionError(header.get("version"))
    extra = header.keys() - set(HEADER_KEYS)
    if extra:
        names = ", ".join(f'"{k}"' for k in sorted(extra))
        raise EventFormatError(f"session header has unknown key(s) {names}")
    if type(header.get("id")) is not str or not header["id"]:
        raise EventFormatError("session header id must be a non-empty string")
    for key in ("createdAt", "seedLength", "delegationDepth"):
        if key in header and not _is_count(header[key]):
            raise EventFormatError(
                f"session header {key} must be a non-negative safe integer, got {header[key]!r}"
            )
    if "createdAt" not in header:
        raise EventFormatError("session header has no createdAt")
    if "cwd" in header and (type(header["cwd"]) is not str or not os.path.isabs(header["cwd"])):
        raise EventFormatError(
            f"session header cwd must be an absolute path, got {header['cwd']!r}"
        )
    for key in ("parentSession", "agentPreset"):
        if key in header and type(header[key]) is not str:
            raise EventFormatError(f"session header {key} must be a string, got {header[key]!r}")
    if "origin" in header and header["origin"] != "subagent":
        raise EventFormatError(
            f'session header origin must be "subagent", got {header["origin"]!r}'
        )


def validate_log(header: Any, events: Sequence[Any]) -> Surface:
    """Validate a whole stored log: the header, then every event in order (seq contiguous from
    0, envelopes, surface operations; the members of a compact log's packed chunk rows were
    checked when it was read, `plain_events`). Returns the resulting surface."""
    validator = LogValidator(header, events)
    for index, event in plain_events(events):
        validator.check(index, event)
    return validator.surface


class LogValidator:
    """`validate_log` one event at a time, for a caller that walks the log for more than
    validation: construct it (checks the header), then `check` each of `plain_events(events)`
    in order."""

    __slots__ = ("events", "surface")

    def __init__(self, header: Any, events: Sequence[Any]) -> None:
        validate_header(header)
        self.events = events
        self.surface = Surface()

    def check(self, index: int, event: Any) -> None:
        check_event(event, index)
        self.surface.check(event, self.events)
        self.surface.apply(event)
