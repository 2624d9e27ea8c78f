"""Logs of older releases of the original harness: refused content and in-memory upgrades.

Every stored log the coordinator reads is upgraded before it is validated: by `upgrade_stored`, or,
in a cold prepare's one walk, event by event with `Upgrade` (docs/legacy-logs.md). It first refuses
the legacy content this build cannot replay, then rewrites the obsolete shapes it can, event by
event in log order, into their current form. The upgrade lives in memory only: nothing is written
back, and an event that needs none is returned as the very same object. A shape that looks legacy
but is malformed is refused, never guessed at. Upgraded objects keep their stored key order and
append new keys after it.

Pure: no I/O, and the stored events are never mutated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from plugins.session.eventlog import plain_events
from plugins.session.jsonutil import MAX_SAFE_INTEGER

from .backend import JsonObject, StoredLog
from .errors import SessionPersistenceCorruptionError

__all__ = ["Upgrade", "upgradable", "upgrade_events", "upgrade_stored"]

#: Turn-end reasons that must be exactly `{kind}` and stay as they are.
_PLAIN_REASONS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
#: Types refused as legacy content (`request/header` only with reason "fallback").
_REFUSED: Final = frozenset({"request/header-delta", "mode/set", "request/header"})
#: Types the refusals or the upgrades look at; every other event is passed over.
_WATCHED: Final = _REFUSED | {
    "turn/start",
    "turn/end",
    "steering/message",
    "user/message",
    "assistant/message",
    "tool/result",
}


def upgrade_stored(session_id: str, stored: StoredLog | None) -> StoredLog | None:
    """`stored` with its events upgraded. A log of another id or format version is returned as
    is: the coordinator refuses it before it looks at any event."""
    if stored is None or not upgradable(session_id, stored.meta):
        return stored
    events = upgrade_events(session_id, stored.events)
    return stored if events is stored.events else dataclasses.replace(stored, events=events)


def upgradable(session_id: str, meta: JsonObject) -> bool:
    """Whether a stored log's events are upgraded: its header names `session_id`, format v0."""
    return meta.get("id") == session_id and meta.get("version") == 0


def upgrade_events(session_id: str, events: Sequence[JsonObject]) -> Sequence[JsonObject]:
    """The upgraded form of a stored log's events (`events` itself when nothing changes).

    Raises `SessionPersistenceCorruptionError` (`stored session "<id>" failed validation:
    Error: <why>`) for refused legacy content and for malformed legacy shapes. The refusals
    are decided on the whole log and win over a malformed shape anywhere in it.
    """
    upgrade = Upgrade(session_id, events)
    for index, event in plain_events(events):  # packed chunk rows are never watched
        upgrade.add(index, event)
    return upgrade.result()


class Upgrade:
    """`upgrade_events` one event at a time, for a walk that checks more on the way (a cold
    prepare's: docs/performance.md): `add` each of `plain_events(events)` in order, then take
    `result()`. Nothing decoded is kept until an upgrade changes an event; from then on the
    events are a list of them all, as `upgrade_events` always made."""

    __slots__ = ("_malformed", "_refused", "_session_id", "_stored", "_upgraded")

    def __init__(self, session_id: str, events: Sequence[JsonObject]) -> None:
        self._session_id = session_id
        self._stored = events
        self._refused: dict[str, object] = {}
        self._malformed: JsonObject | None = None
        self._upgraded: list[JsonObject] | None = None

    @property
    def events(self) -> Sequence[JsonObject]:
        """The events upgraded so far (the stored sequence itself until an upgrade changes
        one; then a list of them all)."""
        return self._stored if self._upgraded is None else self._upgraded

    def add(self, index: int, event: JsonObject) -> JsonObject:
        """`event`, the one at `index`, upgraded (the very same object when nothing changes,
        and once a malformed shape was met)."""
        kind = event.get("type")
        if kind not in _WATCHED:
            return event
        if kind in _REFUSED:
            _note_refusal(self._refused, kind, event)
            return event
        if self._malformed is not None:
            return event
        try:
            new = _upgrade(self._session_id, event, self.events, index)
        except _Malformed:
            self._malformed = event
            return event
        if new is not event:
            if self._upgraded is None:
                self._upgraded = list(self._stored)
            self._upgraded[index] = new
        return new

    def result(self) -> Sequence[JsonObject]:
        """The upgraded events; raises for refused legacy content (the first rule that matched
        anywhere) or else for the first malformed shape (see `upgrade_events`)."""
        session_id = self._session_id
        if self._refused:
            raise _refusal(session_id, self._refused)
        malformed = self._malformed
        if malformed is not None:
            raise _failed(
                session_id,
                f'session "{session_id}" contains malformed pre-react-loop {malformed["type"]} '
                f"at seq {malformed.get('seq')}",
            )
        return self.events


def _failed(session_id: str, text: str) -> SessionPersistenceCorruptionError:
    return SessionPersistenceCorruptionError(
        f'stored session "{session_id}" failed validation: Error: {text}'
    )


def _note_refusal(refused: dict[str, object], kind: str, event: JsonObject) -> None:
    """Record the first seq of each refused kind (`fallback`: a fallback `request/header`)."""
    if kind == "request/header":
        data = event.get("data")
        if type(data) is not dict or data.get("reason") != "fallback":
            return
        kind = "fallback"
    refused.setdefault(kind, event.get("seq"))


def _refusal(session_id: str, refused: dict[str, object]) -> SessionPersistenceCorruptionError:
    """The first rule, in this order, that matched."""
    for kind in ("request/header-delta", "mode/set"):
        if kind in refused:
            return _failed(
                session_id,
                f'session "{session_id}" contains unsupported legacy {kind} event '
                f"at seq {refused[kind]}",
            )
    return _failed(
        session_id,
        f'session "{session_id}" contains unsupported legacy request/header reason '
        f'"fallback" at seq {refused["fallback"]}',
    )


class _Malformed(Exception):
    """A legacy-looking shape that is not a valid legacy shape."""


def _is_safe_int(value: object) -> bool:
    """JavaScript's `Number.isSafeInteger` (`1.0` counts: JSON cannot tell it from `1`)."""
    if type(value) is float:
        return value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def _at_least(value: object, low: int) -> bool:
    return _is_safe_int(value) and value >= low  # type: ignore[operator]


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _is_str(value: object) -> bool:
    return type(value) is str


def _with_data(event: JsonObject, data: Any, **envelope: Any) -> JsonObject:
    """`event` with new `data` (and envelope values), every key where it was."""
    return {**event, **envelope, "data": data}


def _without(data: JsonObject, *keys: str) -> JsonObject:
    return {key: value for key, value in data.items() if key not in keys}


def _legacy_id(session_id: str, event: JsonObject) -> str:
    return f"legacy-message:{session_id}:{event.get('seq')}"


def _upgrade(
    session_id: str, event: JsonObject, events: Sequence[JsonObject], index: int
) -> JsonObject:
    """One event's upgrade; `events[:index]` are the already upgraded events before it."""
    kind = event["type"]
    if kind == "turn/start":
        return _turn_start(event)
    if kind == "turn/end":
        return _turn_end(event)
    if kind == "steering/message":
        event = _steering(session_id, event)
    return _message(session_id, event, events, index)


def _turn_start(event: JsonObject) -> JsonObject:
    data = event.get("data")
    if type(data) is not dict or "trigger" not in data:
        return event
    trigger = data["trigger"]
    if (
        data.keys() != {"turn", "trigger"}
        or not _at_least(data["turn"], 1)
        or type(trigger) is not dict
        or type(trigger.get("kind")) is not str
        or not trigger["kind"]
    ):
        raise _Malformed
    return _with_data(event, {"turn": data["turn"]})


def _turn_end(event: JsonObject) -> JsonObject:
    data = event.get("data")
    if type(data) is not dict or data.keys() != {"turn", "reason"}:
        raise _Malformed
    reason = data["reason"]
    if not _at_least(data["turn"], 1) or type(reason) is not dict:
        raise _Malformed
    kind = reason.get("kind")
    if type(kind) is not str:
        raise _Malformed
    only_kind = reason.keys() == {"kind"}
    if kind in _PLAIN_REASONS:
        if not only_kind:
            raise _Malformed
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        if not only_kind:
            raise _Malformed
        current: JsonObject = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        if not only_kind:
            raise _Malformed
        current = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        if "error" in reason:
            return event
        current = {"kind": "error", "error": _legacy_failure(reason)}
    else:
        return event
    return _with_data(event, {**data, "reason": current})


#: The optional keys of a legacy failure object and what each must be.
_FAILURE_OPTIONAL: Final = {
    "status": _is_number,
    "providerRetryAfterMs": _is_number,
    "requestId": _is_str,
}


def _legacy_failure(reason: JsonObject) -> JsonObject:
    """The `error` of an old `{kind:"error", step, failure}` or `{..., step, message[, code]}`."""
    if not _at_least(reason.get("step"), 0):
        raise _Malformed
    failure = reason.get("failure")
    if (
        type(failure) is dict
        and reason.keys() == {"kind", "step", "failure"}
        and {"message", "code"} <= failure.keys()
        and failure.keys() <= {"message", "code", *_FAILURE_OPTIONAL}
        and type(failure["message"]) is str
        and type(failure["code"]) is str
        and all(check(failure[key]) for key, check in _FAILURE_OPTIONAL.items() if key in failure)
    ):
        return failure
    keys = {"kind", "step", "message", "code"} if "code" in reason else {"kind", "step", "message"}
    code = reason.get("code", "UNKNOWN")
    if reason.keys() != keys or type(reason["message"]) is not str or type(code) is not str:
        raise _Malformed
    return {"message": reason["message"], "code": code}


def _steering(session_id: str, event: JsonObject) -> JsonObject:
    """The removed `steering/message` becomes the `user/message` it carried."""
    data = event.get("data")
    if type(data) is not dict or not _is_safe_int(data.get("turn")):
        raise _Malformed
    if data.keys() == {"turn", "message"} and type(data["message"]) is dict:
        return _with_data(event, data["message"], type="user/message")
    if data.keys() != {"turn", "content", "source"}:
        raise _Malformed
    message = {**_without(data, "turn"), "id": _legacy_id(session_id, event), "role": "user"}
    return _with_data(event, message, type="user/message")


def _message(
    session_id: str, event: JsonObject, events: Sequence[JsonObject], index: int
) -> JsonObject:
    """Message events written before message identities and the `message` wrapper. Anything
    that does not look like such an event is left for validation to judge."""
    data = event.get("data")
    if type(data) is not dict:
        return event
    kind = event["type"]
    if kind == "user/message":
        if "id" in data or "role" in data or "message" in data:
            return event
        if "content" not in data or "source" not in data:
            return event
        return _with_data(event, {**data, "id": _legacy_id(session_id, event), "role": "user"})
    if "message" in data:
        return event
    if kind == "assistant/message":
        if "content" not in data or "provenance" not in data:
            return event
        provenance = data["provenance"]
        message = {
            "id": _legacy_id(session_id, event),
            "role": "assistant",
            "content": data["content"],
            "source": {**(provenance if type(provenance) is dict else {}), "kind": "model"},
        }
        return _with_data(event, {**_without(data, "content", "provenance"), "message": message})
    if kind == "tool/result" and {"callId", "content", "isError"} <= data.keys():
        call_id = data["callId"]
        block = {
            "type": "tool-result",
            "toolCallId": call_id,
            "content": data["content"],
            "isError": data["isError"],
        }
        message = {
            "id": _tool_result_id(session_id, event, events, index),
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
        }
        if message["id"] is None:  # a replacement of a message without identity: refused later
            del message["id"]
        rest = _without(data, "callId", "content", "isError")
        return _with_data(event, {**rest, "message": message})
    return event


def _tool_result_id(
    session_id: str, event: JsonObject, events: Sequence[JsonObject], index: int
) -> str | None:
    """A replacing result keeps the message id of the (upgraded) event at its `start` seq."""
    op = event.get("surfaceOp")
    if type(op) is not dict or op.get("op") != "replace" or not _is_number(op.get("start")):
        return _legacy_id(session_id, event)
    start = op["start"]
    if not _is_safe_int(start) or not 0 <= start < index or events[int(start)].get("seq") != start:
        return None
    return _message_id(events[int(start)])


def _message_id(event: JsonObject) -> str | None:
    """The message id an event carries (`user/message`: in its data; others: `data.message`)."""
    data = event.get("data")
    if type(data) is not dict:
        return None
    message = data if event.get("type") == "user/message" else data.get("message")
    identity = message.get("id") if type(message) is dict else None
    return identity if type(identity) is str else None
