"""The in-memory legacy upgrades and refusals, rule by rule, on small logs (docs/legacy-logs.md).

Expected events are written as JSON text: the upgrade must keep the stored key order and append
new keys in a fixed order, and comparing `dumps` output checks both byte for byte.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence.legacy import upgrade_events

JsonObject = dict[str, Any]
SID = "s1"


def ev(seq: int, kind: str, data: Any, **envelope: Any) -> JsonObject:
    return {"type": kind, "seq": seq, "time": 7, "data": data, **envelope}


def padded(event: JsonObject) -> list[JsonObject]:
    """A log whose last event is `event` (earlier seqs are plain `step/start` events)."""
    seq = event["seq"]
    return [ev(i, "step/start", {"turn": 1, "step": i}) for i in range(seq)] + [event]


def upgraded(event: JsonObject) -> str:
    """The upgraded form of `event` as JSON text (the input is checked to stay untouched)."""
    log = padded(event)
    before = copy.deepcopy(log)
    out = upgrade_events(SID, log)
    assert log == before
    return dumps(out[-1])


def refused(events: list[JsonObject]) -> str:
    before = copy.deepcopy(events)
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        upgrade_events(SID, events)
    assert events == before
    return str(caught.value)


def malformed(kind: str, seq: int) -> str:
    return (
        'stored session "s1" failed validation: Error: session "s1" contains malformed '
        f"pre-react-loop {kind} at seq {seq}"
    )


def test_a_current_log_is_returned_as_is() -> None:
    log = [
        ev(0, "turn/start", {"turn": 1}),
        ev(1, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert upgrade_events(SID, log) is log


def test_unchanged_events_stay_the_same_objects() -> None:
    log = [ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "user"}}), ev(1, "todo/write", {})]
    out = upgrade_events(SID, log)
    assert out is not log
    assert out[1] is log[1]


# -- 1. turn/start with a trigger ---------------------------------------------------------------


def test_turn_start_trigger_is_dropped() -> None:
    event = ev(3, "turn/start", {"trigger": {"kind": "user", "extra": 1}, "turn": 2})
    assert upgraded(event) == '{"type":"turn/start","seq":3,"time":7,"data":{"turn":2}}'


def test_turn_start_without_trigger_is_unchanged() -> None:
    event = ev(0, "turn/start", {"turn": 0, "other": True})
    assert upgrade_events(SID, [event])[0] is event


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 1, "trigger": {"kind": "user"}, "x": 1},
        {"trigger": {"kind": "user"}},
        {"turn": 0, "trigger": {"kind": "user"}},
        {"turn": -1, "trigger": {"kind": "user"}},
        {"turn": 1.5, "trigger": {"kind": "user"}},
        {"turn": "1", "trigger": {"kind": "user"}},
        {"turn": True, "trigger": {"kind": "user"}},
        {"turn": 2**53, "trigger": {"kind": "user"}},
        {"turn": 1, "trigger": "user"},
        {"turn": 1, "trigger": None},
        {"turn": 1, "trigger": {}},
        {"turn": 1, "trigger": {"kind": ""}},
        {"turn": 1, "trigger": {"kind": 3}},
    ],
)
def test_malformed_turn_start_triggers_are_refused(data: JsonObject) -> None:
    assert refused(padded(ev(2, "turn/start", data))) == malformed("turn/start", 2)


def test_an_integral_float_turn_is_a_safe_integer() -> None:
    event = ev(0, "turn/start", {"turn": 1.0, "trigger": {"kind": "user"}})
    assert upgraded(event) == '{"type":"turn/start","seq":0,"time":7,"data":{"turn":1}}'


# -- 2. turn/end with an old reason -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["completed", "blocked", "max-tokens", "interrupted"])
def test_plain_reasons_are_unchanged(kind: str) -> None:
    event = ev(0, "turn/end", {"reason": {"kind": kind}, "turn": 1})
    assert upgrade_events(SID, [event])[0] is event


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ({"kind": "aborted"}, '{"kind":"aborted","reason":{"kind":"legacy"}}'),
        ({"kind": "disposed"}, '{"kind":"aborted","reason":{"kind":"disposed"}}'),
        (
            {"kind": "error", "step": 0, "message": "boom"},
            '{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}',
        ),
        (
            {"code": "E_X", "message": "boom", "step": 3, "kind": "error"},
            '{"kind":"error","error":{"message":"boom","code":"E_X"}}',
        ),
        (
            {"kind": "error", "step": 1, "failure": {"code": "C", "message": "m"}},
            '{"kind":"error","error":{"code":"C","message":"m"}}',
        ),
        (
            {
                "kind": "error",
                "step": 1,
                "failure": {
                    "message": "m",
                    "requestId": "r",
                    "code": "C",
                    "status": 429,
                    "providerRetryAfterMs": 1.5,
                },
            },
            '{"kind":"error","error":{"message":"m","requestId":"r","code":"C","status":429,'
            '"providerRetryAfterMs":1.5}}',
        ),
    ],
)
def test_old_reasons_are_upgraded(reason: JsonObject, expected: str) -> None:
    event = ev(4, "turn/end", {"reason": reason, "turn": 2})
    assert upgraded(event) == (
        f'{{"type":"turn/end","seq":4,"time":7,"data":{{"reason":{expected},"turn":2}}}}'
    )


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "aborted", "reason": "anything", "extra": 1},
        {"kind": "error", "error": {"message": "m", "code": "C"}},
        {"kind": "error", "error": None, "step": "not checked"},
        {"kind": "some-future-kind", "payload": [1]},
    ],
)
def test_current_and_unknown_reasons_are_unchanged(reason: JsonObject) -> None:
    event = ev(0, "turn/end", {"turn": 1, "reason": reason})
    assert upgrade_events(SID, [event])[0] is event


@pytest.mark.parametrize(
    "data",
    [
        None,
        [1],
        {"turn": 1},
        {"reason": {"kind": "completed"}},
        {"turn": 1, "reason": {"kind": "completed"}, "extra": 1},
        {"turn": 0, "reason": {"kind": "completed"}},
        {"turn": "1", "reason": {"kind": "completed"}},
        {"turn": 1.5, "reason": {"kind": "completed"}},
        {"turn": 1, "reason": "completed"},
        {"turn": 1, "reason": {}},
        {"turn": 1, "reason": {"kind": 1}},
        {"turn": 1, "reason": {"kind": "completed", "extra": 1}},
        {"turn": 1, "reason": {"kind": "interrupted", "why": "x"}},
        {"turn": 1, "reason": {"kind": "aborted", "extra": 1}},
        {"turn": 1, "reason": {"kind": "disposed", "reason": {"kind": "user"}}},
        {"turn": 1, "reason": {"kind": "error"}},
        {"turn": 1, "reason": {"kind": "error", "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "step": -1, "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "step": 0.5, "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "step": "0", "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "message": 1}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "message": "m", "code": 5}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "message": "m", "extra": 1}},
        {"turn": 1, "reason": {"kind": "error", "step": 0}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "failure": {"message": "m"}}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "failure": {"code": "C"}}},
        {"turn": 1, "reason": {"kind": "error", "step": 0, "failure": "m"}},
        {
            "turn": 1,
            "reason": {"kind": "error", "step": 0, "failure": {"message": 1, "code": "C"}},
        },
        {
            "turn": 1,
            "reason": {"kind": "error", "step": 0, "failure": {"message": "m", "code": None}},
        },
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "step": 0,
                "failure": {"message": "m", "code": "C", "status": "429"},
            },
        },
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "step": 0,
                "failure": {"message": "m", "code": "C", "providerRetryAfterMs": True},
            },
        },
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "step": 0,
                "failure": {"message": "m", "code": "C", "requestId": 7},
            },
        },
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "step": 0,
                "failure": {"message": "m", "code": "C", "extra": 1},
            },
        },
        {
            "turn": 1,
            "reason": {
                "kind": "error",
                "step": 0,
                "failure": {"message": "m", "code": "C"},
                "message": "m",
            },
        },
    ],
)
def test_malformed_turn_ends_are_refused(data: Any) -> None:
    assert refused(padded(ev(1, "turn/end", data))) == malformed("turn/end", 1)


# -- 3. steering/message ------------------------------------------------------------------------


def test_wrapped_steering_becomes_its_user_message() -> None:
    message = {"id": "m1", "role": "user", "content": [], "source": {"kind": "user"}}
    event = ev(2, "steering/message", {"turn": 1, "message": message}, surfaceOp="append")
    assert upgraded(event) == (
        '{"type":"user/message","seq":2,"time":7,"data":{"id":"m1","role":"user","content":[],'
        '"source":{"kind":"user"}},"surfaceOp":"append"}'
    )


def test_wrapped_steering_without_identity_gets_the_legacy_id() -> None:
    event = ev(
        2, "steering/message", {"message": {"content": [], "source": {"kind": "user"}}, "turn": 1}
    )
    assert upgraded(event) == (
        '{"type":"user/message","seq":2,"time":7,"data":{"content":[],"source":{"kind":"user"},'
        '"id":"legacy-message:s1:2","role":"user"}}'
    )


def test_flat_steering_becomes_a_user_message_with_identity() -> None:
    data = {"source": {"kind": "user"}, "turn": 3, "content": [{"type": "text", "text": "hi"}]}
    event = ev(5, "steering/message", data, surfaceOp="append")
    assert upgraded(event) == (
        '{"type":"user/message","seq":5,"time":7,"data":{"source":{"kind":"user"},'
        '"content":[{"type":"text","text":"hi"}],"id":"legacy-message:s1:5","role":"user"},'
        '"surfaceOp":"append"}'
    )


@pytest.mark.parametrize(
    "data",
    [
        None,
        "text",
        {"turn": 1},
        {"message": {"content": []}},
        {"turn": "1", "message": {"content": []}},
        {"turn": 1.5, "content": [], "source": {"kind": "user"}},
        {"turn": 1, "message": "not an object"},
        {"turn": 1, "message": {"content": []}, "extra": 1},
        {"turn": 1, "content": []},
        {"turn": 1, "source": {"kind": "user"}},
        {"turn": 1, "content": [], "source": {"kind": "user"}, "extra": 1},
        {"content": [], "source": {"kind": "user"}},
    ],
)
def test_malformed_steering_is_refused(data: Any) -> None:
    assert refused(padded(ev(3, "steering/message", data))) == malformed("steering/message", 3)


# -- 4. user/message before message identities --------------------------------------------------


def test_old_user_message_gets_identity_appended() -> None:
    data = {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}
    event = ev(1, "user/message", data, sourceEventSeqs=[0], surfaceOp="append")
    assert upgraded(event) == (
        '{"type":"user/message","seq":1,"time":7,"data":{"content":[{"type":"text","text":"hi"}],'
        '"source":{"kind":"user"},"id":"legacy-message:s1:1","role":"user"},'
        '"sourceEventSeqs":[0],"surfaceOp":"append"}'
    )


@pytest.mark.parametrize(
    "data",
    [
        {"id": "m", "content": [], "source": {"kind": "user"}},
        {"role": "user", "content": [], "source": {"kind": "user"}},
        {"message": {}, "content": [], "source": {"kind": "user"}},
        {"content": []},
        {"source": {"kind": "user"}},
        "text",
    ],
)
def test_current_looking_user_messages_are_left_for_validation(data: Any) -> None:
    event = ev(0, "user/message", data, surfaceOp="append")
    assert upgrade_events(SID, [event])[0] is event


# -- 5. assistant/message before the message wrapper --------------------------------------------


def test_old_assistant_message_is_wrapped() -> None:
    data = {
        "turn": 1,
        "content": [{"type": "text", "text": "ok"}],
        "step": 2,
        "provenance": {"provider": "p", "kind": "ignored", "model": "m"},
        "usage": {"inputTokens": 1},
    }
    event = ev(4, "assistant/message", data, surfaceOp="append", sourceEventSeqs=[])
    assert upgraded(event) == (
        '{"type":"assistant/message","seq":4,"time":7,"data":{"turn":1,"step":2,'
        '"usage":{"inputTokens":1},"message":{"id":"legacy-message:s1:4","role":"assistant",'
        '"content":[{"type":"text","text":"ok"}],"source":{"provider":"p","kind":"model",'
        '"model":"m"}}},"surfaceOp":"append","sourceEventSeqs":[]}'
    )


def test_a_provenance_that_is_not_an_object_contributes_no_keys() -> None:
    event = ev(0, "assistant/message", {"content": [], "provenance": "p"})
    assert loads(upgraded(event))["data"]["message"]["source"] == {"kind": "model"}


@pytest.mark.parametrize(
    "data",
    [
        {"message": {}, "content": [], "provenance": {}},
        {"content": []},
        {"provenance": {}},
    ],
)
def test_current_looking_assistant_messages_are_unchanged(data: JsonObject) -> None:
    event = ev(0, "assistant/message", data)
    assert upgrade_events(SID, [event])[0] is event


# -- 6. tool/result before the message wrapper --------------------------------------------------


def test_old_tool_result_is_wrapped() -> None:
    data = {"turn": 1, "callId": "c1", "step": 1, "content": [{"type": "text", "text": "r"}]}
    data["isError"] = False
    data["meta"] = {"ms": 3}
    event = ev(6, "tool/result", data, surfaceOp="append", sourceEventSeqs=[5])
    assert upgraded(event) == (
        '{"type":"tool/result","seq":6,"time":7,"data":{"turn":1,"step":1,"meta":{"ms":3},'
        '"message":{"id":"legacy-message:s1:6","role":"user","content":[{"type":"tool-result",'
        '"toolCallId":"c1","content":[{"type":"text","text":"r"}],"isError":false}],'
        '"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append","sourceEventSeqs":[5]}'
    )


def test_a_replacing_old_tool_result_keeps_the_replaced_message_id() -> None:
    first = {"turn": 1, "step": 1, "callId": "c1", "content": "long", "isError": False}
    again = {"turn": 1, "step": 1, "callId": "c1", "content": "short", "isError": False}
    log = [
        ev(0, "step/start", {"turn": 1, "step": 1}),
        ev(1, "tool/result", first, surfaceOp="append"),
        ev(2, "tool/result", again, surfaceOp={"op": "replace", "start": 1, "end": 1}),
    ]
    out = upgrade_events(SID, log)
    assert out[1]["data"]["message"]["id"] == "legacy-message:s1:1"
    assert out[2]["data"]["message"]["id"] == "legacy-message:s1:1"
    assert out[2]["data"]["message"]["content"][0]["content"] == "short"


def test_a_replacing_old_tool_result_takes_a_current_message_id() -> None:
    message = {"id": "msg-9", "role": "user", "content": [], "source": {"kind": "tool"}}
    again = {"callId": "c1", "content": "short", "isError": True}
    log = [
        ev(0, "tool/result", {"turn": 1, "step": 1, "message": message}, surfaceOp="append"),
        ev(1, "tool/result", again, surfaceOp={"op": "replace", "start": 0, "end": 0}),
    ]
    assert upgrade_events(SID, log)[1]["data"]["message"]["id"] == "msg-9"


@pytest.mark.parametrize("start", [0, 5, -1])
def test_a_replacement_of_a_message_without_identity_has_no_id(start: int) -> None:
    again = {"callId": "c1", "content": "x", "isError": True}
    log = [
        ev(0, "todo/write", {}),
        ev(1, "tool/result", again, surfaceOp={"op": "replace", "start": start, "end": start}),
    ]
    message = upgrade_events(SID, log)[1]["data"]["message"]
    assert list(message) == ["role", "content", "source"]


@pytest.mark.parametrize(
    "data",
    [
        {"message": {}, "callId": "c", "content": [], "isError": False},
        {"callId": "c", "content": []},
        {"callId": "c", "isError": False},
        {"content": [], "isError": False},
    ],
)
def test_current_looking_tool_results_are_unchanged(data: JsonObject) -> None:
    event = ev(0, "tool/result", data)
    assert upgrade_events(SID, [event])[0] is event


# -- refusals (checked on the whole log, before upgrading) --------------------------------------


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (
            ev(2, "request/header-delta", {"delta": {}}),
            'session "s1" contains unsupported legacy request/header-delta event at seq 2',
        ),
        (
            ev(2, "mode/set", {"mode": "plan"}, ignorable=True),
            'session "s1" contains unsupported legacy mode/set event at seq 2',
        ),
        (
            ev(2, "request/header", {"header": {}, "reason": "fallback"}),
            'session "s1" contains unsupported legacy request/header reason "fallback" at seq 2',
        ),
    ],
)
def test_unsupported_legacy_content_is_refused(event: JsonObject, text: str) -> None:
    assert refused(padded(event)) == f'stored session "s1" failed validation: Error: {text}'


def test_refusals_follow_rule_order_then_log_order() -> None:
    log = [
        ev(0, "request/header", {"header": {}, "reason": "fallback"}),
        ev(1, "mode/set", {}),
        ev(2, "request/header-delta", {}),
        ev(3, "request/header-delta", {}),
    ]
    assert refused(log).endswith("unsupported legacy request/header-delta event at seq 2")
    assert refused(log[:2]).endswith("unsupported legacy mode/set event at seq 1")
    assert refused(log[:1]).endswith('reason "fallback" at seq 0')


def test_refusals_win_over_a_malformed_shape_earlier_in_the_log() -> None:
    log = [ev(0, "turn/end", {"turn": 0}), ev(1, "mode/set", {})]
    assert refused(log).endswith("unsupported legacy mode/set event at seq 1")


def test_request_headers_of_other_reasons_pass() -> None:
    log = [ev(0, "request/header", {"header": {}, "reason": "initial"}), ev(1, "request/header", 3)]
    assert upgrade_events(SID, log) is log


def test_the_session_id_is_used_as_given() -> None:
    with pytest.raises(SessionPersistenceCorruptionError) as caught:
        upgrade_events('a "b"', [ev(0, "turn/end", {})])
    assert str(caught.value) == (
        'stored session "a "b"" failed validation: Error: session "a "b"" contains malformed '
        "pre-react-loop turn/end at seq 0"
    )
