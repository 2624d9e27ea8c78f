"""Session on its own: append rules, seeds, stored logs (no store, so nothing is published)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.session import EventFormatError, Session, UnknownEventTypeError, derive_messages
from plugins.session.jsonutil import dumps


class Clock:
    def __init__(self, start: int = 1000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1
        return self.now


HEADER = {"version": 0, "id": "s", "createdAt": 5}


def user_message(text: str = "hi", mid: str = "m1") -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def test_append_builds_live_event_in_key_order() -> None:
    session = Session(HEADER, clock=Clock())
    first = session.append("turn/start", {"turn": 1})
    event = session.append(
        "user/message", user_message(), surface_op="append", source_event_seqs=[0]
    )
    assert dumps(first) == '{"type":"turn/start","seq":0,"time":1001,"data":{"turn":1}}'
    assert list(event) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert event["seq"] == 1
    assert event["time"] == 1002
    assert session.events == [first, event]
    assert session.seq == 2
    assert session.id == "s"
    assert session.first_live_seq == 0
    assert session.surface.nodes == [1]
    assert session.messages() == [user_message()]


def test_ignorable_goes_after_data() -> None:
    session = Session(HEADER, clock=Clock())
    event = session.append("plugin/custom", {"x": 1}, ignorable=True)
    assert list(event) == ["type", "seq", "time", "data", "ignorable"]


def test_append_snapshots_data_and_options() -> None:
    session = Session(HEADER, clock=Clock())
    session.append("turn/start", {"turn": 1})
    data = user_message()
    seqs = [0]
    event = session.append("user/message", data, surface_op="append", source_event_seqs=seqs)
    data["content"][0]["text"] = "changed"
    seqs.append(99)
    assert event["data"]["content"][0]["text"] == "hi"
    assert event["sourceEventSeqs"] == [0]


@pytest.mark.parametrize(
    "data",
    [{"x": (1, 2)}, {"x": float("nan")}, {"x": -0.0}, {"x": 2**53}, {1: 2}, {"x": {1, 2}}],
)
def test_non_lossless_data_is_refused_with_exact_text(data: Any) -> None:
    session = Session(HEADER, clock=Clock())
    with pytest.raises(TypeError) as info:
        session.append("turn/start", data)
    assert str(info.value) == 'session event "turn/start" carries non-JSON-serializable data'
    assert session.events == []


def test_non_lossless_options_are_refused() -> None:
    session = Session(HEADER, clock=Clock())
    with pytest.raises(TypeError, match='session event "user/message" carries non-JSON'):
        session.append("user/message", user_message(), surface_op="append", source_event_seqs=(0,))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "data", "options", "error"),
    [
        ("future/type", {}, {}, UnknownEventTypeError),
        ("request/header-delta", {}, {"ignorable": True}, EventFormatError),
        ("user/message", user_message(), {}, EventFormatError),
        ("turn/start", {"turn": 1}, {"surface_op": "append"}, EventFormatError),
        (
            "user/message",
            user_message(),
            {"surface_op": "append", "source_event_seqs": [0]},
            EventFormatError,
        ),
        ("request/header", {"header": {}, "reason": "fallback"}, {}, EventFormatError),
    ],
)
def test_invalid_appends_leave_the_log_untouched(
    kind: str, data: Any, options: dict[str, Any], error: type[Exception]
) -> None:
    session = Session(HEADER, clock=Clock())
    with pytest.raises(error):
        session.append(kind, data, **options)
    assert session.events == []
    assert session.surface.nodes == []


@pytest.mark.parametrize(
    ("kind", "time", "error"),
    [
        ("", 1, "event at seq 0 has no valid type: ''"),
        (3, 1, "event at seq 0 has no valid type: 3"),
        ("turn/start", 1.5, 'event "turn/start" (seq 0) time must be an integer epoch in ms'),
        ("turn/start", 2**53, 'event "turn/start" (seq 0) time must be an integer epoch in ms'),
    ],
)
def test_an_appended_type_and_clock_time_are_checked(kind: Any, time: Any, error: str) -> None:
    """The envelope `append` builds is checked where it can be wrong: the caller's type and
    the clock's time, with the errors of a stored event's check."""
    session = Session(HEADER, clock=lambda: time)
    with pytest.raises(EventFormatError) as info:
        session.append(kind, {"turn": 1})
    assert str(info.value).startswith(error)
    assert session.events == []


def test_replace_validated_against_the_surface() -> None:
    session = Session(HEADER, clock=Clock())
    session.append("user/message", user_message("a", "1"), surface_op="append")
    session.append("user/message", user_message("b", "2"), surface_op="append")
    with pytest.raises(EventFormatError, match="missing"):
        session.append(
            "user/message",
            user_message("s", "3"),
            surface_op={"op": "replace", "start": 0, "end": 1},
            source_event_seqs=[0],
        )
    session.append(
        "user/message",
        user_message("s", "3"),
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    assert [m["id"] for m in session.messages()] == ["3"]


def test_unseeded_session_has_no_events() -> None:
    session = Session(HEADER)
    assert session.events == []
    assert session.first_live_seq == 0


def test_empty_seed_gets_end_seed() -> None:
    session = Session(HEADER, [], clock=Clock(41))
    assert session.events == [{"type": "session/end-seed", "seq": 0, "time": 42, "data": {}}]
    assert session.first_live_seq == 1


def test_seed_is_copied_validated_and_closed() -> None:
    seed: list[dict[str, Any]] = [
        {"type": "turn/start", "seq": 0, "time": 3, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 4,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    session = Session(HEADER, seed, clock=Clock())
    seed[0]["data"]["turn"] = 7
    assert session.events[0]["data"] == {"turn": 1}
    assert [e["type"] for e in session.events] == ["turn/start", "turn/end", "session/end-seed"]
    assert session.first_live_seq == 3
    assert session.append("turn/start", {"turn": 2})["seq"] == 3


def test_seed_ending_with_end_seed_is_kept() -> None:
    seed = [{"type": "session/end-seed", "seq": 0, "time": 3, "data": {}}]
    session = Session(HEADER, seed)
    assert session.events == seed
    assert session.first_live_seq == 1


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ([{"type": "turn/start", "seq": 1, "time": 0, "data": {}}], "expected seq 0"),
        ([{"type": "nope", "seq": 0, "time": 0, "data": {}}], 'event type "nope"'),
        ([{"type": "turn/start", "seq": 0, "time": 0}], "has no data"),
    ],
)
def test_bad_seeds_are_refused(seed: list[Any], message: str) -> None:
    with pytest.raises(EventFormatError) as info:
        Session(HEADER, seed)
    assert message in str(info.value)


def test_non_lossless_seed_is_refused() -> None:
    seed = [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": (1,)}}]
    with pytest.raises(TypeError) as info:
        Session(HEADER, seed)
    assert str(info.value) == 'session event "turn/start" carries non-JSON-serializable data'


def test_bad_header_is_refused() -> None:
    with pytest.raises(EventFormatError, match="cwd must be an absolute path"):
        Session({**HEADER, "cwd": "relative"})


def test_from_stored_validates_and_adds_end_seed(fixture_log: Any) -> None:
    events = list(fixture_log.events)
    session = Session.from_stored(fixture_log.header, events)
    assert session.events[: len(events)] == fixture_log.events
    assert session.events[len(events) :][0]["type"] == "session/end-seed"
    assert session.events[len(events)]["seq"] == len(events)
    assert session.first_live_seq == len(events) + 1
    assert session.messages() == derive_messages(session.events)


def test_from_stored_refuses_invalid_logs(outcome_unknown_log: Any) -> None:
    events = list(outcome_unknown_log.events)
    del events[2]
    with pytest.raises(EventFormatError, match="not contiguous"):
        Session.from_stored(outcome_unknown_log.header, events)


def test_replace_surface_op_is_written_in_canonical_order() -> None:
    session = Session(HEADER, clock=Clock())
    session.append("user/message", user_message("a", "1"), surface_op="append")
    op = {"end": 0, "start": 0, "op": "replace"}
    event = session.append(
        "user/message", user_message("b", "2"), surface_op=op, source_event_seqs=[0]
    )
    assert dumps(event["surfaceOp"]) == '{"op":"replace","start":0,"end":0}'
    assert op == {"end": 0, "start": 0, "op": "replace"}
    assert event["surfaceOp"] is not op
