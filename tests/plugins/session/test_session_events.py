"""Event model: key order, envelope/header validation, surface rules, whole-log validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from plugins.session.events import (
    KNOWN_EVENT_TYPES,
    EventFormatError,
    Surface,
    UnknownEventTypeError,
    UnsupportedVersionError,
    check_event,
    closer_event,
    live_event,
    make_header,
    validate_header,
    validate_log,
)


def user(seq: int, text: str = "hi", **extra: Any) -> dict[str, Any]:
    message = {
        "id": f"u{seq}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return {
        "type": "user/message",
        "seq": seq,
        "time": 5,
        "data": message,
        "surfaceOp": "append",
        **extra,
    }


def tool_result(seq: int, call_id: str = "c1", text: str = "ok", **extra: Any) -> dict[str, Any]:
    message = {
        "id": f"r{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": False,
            }
        ],
    }
    return {
        "type": "tool/result",
        "seq": seq,
        "time": 5,
        "data": {"turn": 1, "step": 1, "message": message},
        "surfaceOp": "append",
        **extra,
    }


def test_there_are_48_known_types() -> None:
    assert len(KNOWN_EVENT_TYPES) == 48
    assert "web/deepseek-search-llm-request" in KNOWN_EVENT_TYPES
    assert "request/header-delta" not in KNOWN_EVENT_TYPES


def test_live_key_order() -> None:
    event = live_event("tool/result", 3, 9, {"a": 1}, source_event_seqs=[1], surface_op="append")
    assert list(event) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert list(live_event("x/y", 0, 0, {}, ignorable=True)) == [
        "type",
        "seq",
        "time",
        "data",
        "ignorable",
    ]
    assert list(live_event("turn/start", 0, 0, {})) == ["type", "seq", "time", "data"]


def test_closer_key_order() -> None:
    event = closer_event("tool/result", 3, 9, {}, surface_op="append", source_event_seqs=[1])
    assert list(event) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]


def test_valid_events_pass() -> None:
    check_event(user(0), 0)
    check_event(tool_result(2, sourceEventSeqs=[0, 1]), 2)
    check_event({"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}, 0)
    check_event({"type": "new/kind", "seq": 0, "time": 0, "data": 1, "ignorable": True}, 0)
    check_event(
        {
            "type": "request/header",
            "seq": 0,
            "time": 0,
            "data": {"header": {"config": {}}, "reason": "resume"},
        },
        0,
    )


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "event at seq 0 is not a JSON object"),
        ({"type": "turn/start", "seq": 0, "time": 0, "data": {}, "x": 1}, 'unknown key(s) "x"'),
        ({"type": "turn/start", "seq": True, "time": 0, "data": {}}, "no valid seq"),
        ({"type": "turn/start", "seq": 0, "time": 1.5, "data": {}}, "time must be an integer"),
        ({"type": "turn/start", "seq": 0, "time": 0}, "has no data"),
        ({"type": 3, "seq": 0, "time": 0, "data": {}}, "no valid type"),
        (
            {"type": "turn/start", "seq": 0, "time": 0, "data": {}, "ignorable": False},
            "ignorable must be true or absent",
        ),
        (
            {"type": "request/header-delta", "seq": 0, "time": 0, "data": {}, "ignorable": True},
            'event type "request/header-delta" (seq 0) is refused',
        ),
        (
            {
                "type": "request/header",
                "seq": 0,
                "time": 0,
                "data": {"header": {"config": {}}, "reason": "fallback"},
            },
            'reason "fallback" is retired and refused',
        ),
        (
            {
                "type": "request/header",
                "seq": 0,
                "time": 0,
                "data": {"header": {"config": {}}, "reason": "other"},
            },
            "reason must be",
        ),
        (
            {"type": "turn/start", "seq": 0, "time": 0, "data": {}, "surfaceOp": "append"},
            "is not a surface event",
        ),
        (
            {"type": "step/end", "seq": 0, "time": 0, "data": {}, "sourceEventSeqs": []},
            "is not a surface event",
        ),
        ({**user(0), "surfaceOp": None}, "must carry a surfaceOp"),
        ({k: v for k, v in user(0).items() if k != "surfaceOp"}, "must carry a surfaceOp"),
        ({**user(0), "surfaceOp": "prepend"}, "surfaceOp must be"),
        ({**user(0), "surfaceOp": {"op": "replace", "start": 0}}, "surfaceOp must be"),
        ({**user(0), "surfaceOp": {"op": "swap", "start": 0, "end": 0}}, "surfaceOp must be"),
        (user(1, sourceEventSeqs=[1]), "list of earlier seqs"),
        (user(2, sourceEventSeqs=[0, 0]), "must be distinct"),
        (user(1, sourceEventSeqs=[]), "may be empty only on assistant/message"),
        (user(1, sourceEventSeqs="0"), "list of earlier seqs"),
        ({**user(0), "data": {**user(0)["data"], "role": "assistant"}}, 'role must be "user"'),
        ({**user(0), "data": {**user(0)["data"], "content": "x"}}, "content must be a list"),
        ({**user(0), "data": {**user(0)["data"], "source": "user"}}, "source must be an object"),
        ({**user(0), "data": {**user(0)["data"], "id": 1}}, "id must be a string"),
        (
            tool_result(0, call_id="a")
            | {
                "data": {
                    "message": {
                        **tool_result(0)["data"]["message"],
                        "source": {"kind": "tool", "callId": "zz"},
                    }
                }
            },
            'exactly one tool-result block for call "zz"',
        ),
        (
            {
                "type": "assistant/message",
                "seq": 0,
                "time": 0,
                "data": {"message": user(0)["data"]},
                "surfaceOp": "append",
            },
            'role must be "assistant"',
        ),
    ],
)
def test_invalid_events_are_refused(event: Any, message: str) -> None:
    seq = event.get("seq") if isinstance(event, dict) else 0
    with pytest.raises(EventFormatError) as info:
        check_event(event, seq if type(seq) is int else 0)
    assert message in str(info.value)


def test_seq_must_equal_position() -> None:
    with pytest.raises(EventFormatError) as info:
        check_event({"type": "turn/start", "seq": 1, "time": 0, "data": {}}, 0)
    assert str(info.value) == "event seq 1 is not contiguous: expected seq 0"


def test_unknown_types_refused_unless_ignorable() -> None:
    with pytest.raises(UnknownEventTypeError) as info:
        check_event({"type": "future/thing", "seq": 4, "time": 0, "data": {}}, 4)
    assert (info.value.event_type, info.value.seq) == ("future/thing", 4)
    assert (
        str(info.value) == 'event type "future/thing" (seq 4) is unknown and not marked ignorable'
    )


def test_empty_source_event_seqs_allowed_on_assistant_message() -> None:
    message = {"id": "a", "role": "assistant", "content": [], "source": {"kind": "model"}}
    check_event(
        {
            "type": "assistant/message",
            "seq": 0,
            "time": 0,
            "data": {"turn": 1, "step": 1, "message": message},
            "sourceEventSeqs": [],
            "surfaceOp": "append",
        },
        0,
    )


def _apply(surface: Surface, events: list[dict[str, Any]], event: dict[str, Any]) -> None:
    check_event(event, len(events))
    surface.check(event, events)
    surface.apply(event)
    events.append(event)


def test_surface_replace_swaps_a_range_by_node_seqs() -> None:
    surface, events = Surface(), list[dict[str, Any]]()
    for seq in range(4):
        _apply(surface, events, user(seq))
    _apply(
        surface,
        events,
        user(4, surfaceOp={"op": "replace", "start": 1, "end": 2}, sourceEventSeqs=[1, 2]),
    )
    assert surface.nodes == [0, 4, 3]
    # Surface positions, not numbers: 4 now sits before 3.
    _apply(
        surface,
        events,
        user(5, surfaceOp={"op": "replace", "start": 4, "end": 3}, sourceEventSeqs=[3, 4, 0]),
    )
    assert surface.nodes == [0, 5]


@pytest.mark.parametrize(
    ("op", "cited", "message"),
    [
        ({"op": "replace", "start": 1, "end": 9}, [1], "9 is not on the surface"),
        ({"op": "replace", "start": 2, "end": 1}, [1, 2], "ends before it starts"),
        ({"op": "replace", "start": 0, "end": 2}, [0, 2], "missing [1]"),
        ({"op": "replace", "start": 0, "end": 0}, None, "missing [0]"),
    ],
)
def test_surface_replace_rules(op: dict[str, Any], cited: list[int] | None, message: str) -> None:
    surface, events = Surface(), list[dict[str, Any]]()
    for seq in range(3):
        _apply(surface, events, user(seq))
    extra: dict[str, Any] = {"surfaceOp": op}
    if cited is not None:
        extra["sourceEventSeqs"] = cited
    with pytest.raises(EventFormatError) as info:
        _apply(surface, events, user(3, **extra))
    assert message in str(info.value)
    assert surface.nodes == [0, 1, 2]


def test_tool_result_replace_rewrites_inner_content_only() -> None:
    surface, events = Surface(), list[dict[str, Any]]()
    _apply(surface, events, user(0))
    _apply(surface, events, tool_result(1))
    replacement = tool_result(
        2, text="shorter", surfaceOp={"op": "replace", "start": 1, "end": 1}, sourceEventSeqs=[1]
    )
    replacement["data"]["message"]["id"] = "r1"
    _apply(surface, events, replacement)
    assert surface.nodes == [0, 2]


@pytest.mark.parametrize(
    ("mutate", "op", "message"),
    [
        (lambda m: m.update(id="other"), {"start": 1, "end": 1}, "only rewrite the inner content"),
        (
            lambda m: m["content"][0].update(isError=True),
            {"start": 1, "end": 1},
            "only rewrite the inner content",
        ),
        (lambda m: None, {"start": 0, "end": 1}, "single tool/result surface node"),
        (lambda m: None, {"start": 0, "end": 0}, "single tool/result surface node"),
    ],
)
def test_tool_result_replace_refusals(mutate: Any, op: dict[str, int], message: str) -> None:
    surface, events = Surface(), list[dict[str, Any]]()
    _apply(surface, events, user(0))
    _apply(surface, events, tool_result(1))
    replacement = tool_result(2, surfaceOp={"op": "replace", **op}, sourceEventSeqs=[0, 1])
    replacement["data"]["message"]["id"] = "r1"
    mutate(replacement["data"]["message"])
    with pytest.raises(EventFormatError) as info:
        _apply(surface, events, replacement)
    assert message in str(info.value)


def test_header_canonical_order_and_validation() -> None:
    header = make_header("s", 7, {"agentPreset": "p", "cwd": "/w", "seedLength": 2})
    assert list(header) == ["version", "id", "createdAt", "cwd", "seedLength", "agentPreset"]
    validate_header(header)
    validate_header(
        {
            "version": 0,
            "id": "x",
            "createdAt": 0,
            "parentSession": "p",
            "origin": "subagent",
            "delegationDepth": 1,
        }
    )


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("x", "must be a JSON object"),
        ({"version": 0, "id": "", "createdAt": 0}, "id must be a non-empty string"),
        ({"version": 0, "id": "a"}, "has no createdAt"),
        ({"version": 0, "id": "a", "createdAt": -1}, "createdAt must be a non-negative"),
        ({"version": 0, "id": "a", "createdAt": 0, "seedLength": 1.0}, "seedLength must be"),
        ({"version": 0, "id": "a", "createdAt": 0, "delegationDepth": True}, "delegationDepth"),
        ({"version": 0, "id": "a", "createdAt": 0, "cwd": "rel/path"}, "cwd must be an absolute"),
        ({"version": 0, "id": "a", "createdAt": 0, "origin": "user"}, 'origin must be "subagent"'),
        ({"version": 0, "id": "a", "createdAt": 0, "parentSession": 1}, "parentSession must be"),
        ({"version": 0, "id": "a", "createdAt": 0, "extra": 1}, 'unknown key(s) "extra"'),
    ],
)
def test_bad_headers(header: Any, message: str) -> None:
    with pytest.raises(EventFormatError) as info:
        validate_header(header)
    assert message in str(info.value)


@pytest.mark.parametrize("version", [1, -1, None, "0", False])
def test_header_version_refused(version: Any) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        validate_header({"version": version, "id": "a", "createdAt": 0})
    assert info.value.version == version


def test_validate_log_accepts_every_fixture(fixture_log: Any) -> None:
    surface = validate_log(fixture_log.header, fixture_log.events)
    assert surface.nodes


def test_validate_log_requires_contiguous_seqs(outcome_unknown_log: Any) -> None:
    events = copy.deepcopy(outcome_unknown_log.events)
    del events[3]
    with pytest.raises(EventFormatError) as info:
        validate_log(outcome_unknown_log.header, events)
    assert str(info.value) == "event seq 4 is not contiguous: expected seq 3"


def test_validate_log_checks_surface_against_history() -> None:
    events = [
        user(0),
        user(1, surfaceOp={"op": "replace", "start": 5, "end": 5}, sourceEventSeqs=[0]),
    ]
    with pytest.raises(EventFormatError, match="5 is not on the surface"):
        validate_log({"version": 0, "id": "s", "createdAt": 0}, events)
