"""Packed chunk rows: exact shapes, run rules, malformed-row texts, lossless round trips (R10)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonl_helpers import chunk, event

from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence.packing import (
    MalformedStorageRowError,
    decode_record,
    encode_records,
)


def tool_delta(
    seq: int, args: str, *, name: str | None = "edit", call_id: str = "c1"
) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "tool-call-delta", "index": 1, "id": call_id}
    if name is not None:
        body["name"] = name
    body["argumentsDelta"] = args
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 10 + seq,
        "data": {"turn": 2, "step": 3, "chunk": body},
    }


def decode_all(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for r in records for e in decode_record(loads(dumps(r)))]


def test_text_run_packs_with_exact_key_order() -> None:
    events = [chunk(5, "a", time=7), chunk(6, "b", time=9), chunk(7, "c", time=8)]
    (row,) = encode_records(events, pack=True)
    assert dumps(row) == (
        '{"type":"text-chunks","seq0":5,"time0":7,"data":{"turn":1,"step":1,"index":0,'
        '"dt":[2,-1],"texts":["a","b","c"]}}'
    )
    assert decode_all([row]) == events


def test_tool_call_run_packs_id_and_name() -> None:
    events = [tool_delta(s, a) for s, a in ((1, ""), (2, "{"), (3, "}"))]
    (row,) = encode_records(events, pack=True)
    assert dumps(row) == (
        '{"type":"tool-call-chunks","seq0":1,"time0":11,"data":{"turn":2,"step":3,"index":1,'
        '"dt":[1,1],"id":"c1","name":"edit","args":["","{","}"]}}'
    )
    unnamed = [tool_delta(s, "x", name=None) for s in (1, 2, 3)]
    (row,) = encode_records(unnamed, pack=True)
    assert "name" not in row["data"]
    assert decode_all([row]) == unnamed


def test_reasoning_run_uses_its_tag() -> None:
    events = [chunk(s, "r", kind="reasoning-delta") for s in (0, 1, 2)]
    (row,) = encode_records(events, pack=True)
    assert row["type"] == "reasoning-chunks"
    assert decode_all([row]) == events


def test_two_deltas_stay_events_and_pack_false_never_packs() -> None:
    two = [chunk(0, "a"), chunk(1, "b")]
    assert encode_records(two, pack=True) == two
    three = [*two, chunk(2, "c")]
    assert encode_records(three, pack=False) == three


@pytest.mark.parametrize(
    "breaker",
    [
        pytest.param(lambda e: e.update(ignorable=True), id="extra-envelope-key"),
        pytest.param(lambda e: e["data"]["chunk"].update(extra=1), id="extra-chunk-key"),
        pytest.param(lambda e: e["data"].update(turn=2), id="other-turn"),
        pytest.param(lambda e: e["data"]["chunk"].update(index=5), id="other-index"),
        pytest.param(lambda e: e.update(seq=e["seq"] + 1), id="seq-jump"),
        pytest.param(lambda e: e["data"]["chunk"].update(type="reasoning-delta"), id="other-kind"),
        pytest.param(lambda e: e.update(time=1.5), id="float-time"),
        pytest.param(
            lambda e: e.update(data={"step": 1, "turn": 1, "chunk": e["data"]["chunk"]}),
            id="data-key-order",
        ),
    ],
)
def test_a_non_matching_member_breaks_the_run(breaker: Any) -> None:
    events = [chunk(s, "x") for s in range(6)]
    breaker(events[3])
    records = encode_records(events, pack=True)
    assert records[0]["type"] == "text-chunks"
    assert records[0]["data"]["texts"] == ["x", "x", "x"]
    assert len(records) >= 2
    assert events[3] in records or records[1]["seq0"] == events[3]["seq"]


def test_other_tool_call_id_breaks_the_run() -> None:
    events = [tool_delta(1, "a"), tool_delta(2, "b"), tool_delta(3, "c", call_id="c2")]
    assert encode_records(events, pack=True) == events


def test_non_chunk_events_pass_through_between_rows() -> None:
    events = [event(0, "turn/start", {"turn": 1}), *[chunk(s, "t") for s in (1, 2, 3)]]
    events.append(event(4, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    records = encode_records(events, pack=True)
    assert [r["type"] for r in records] == ["turn/start", "text-chunks", "turn/end"]


VALID = {
    "type": "text-chunks",
    "seq0": 4,
    "time0": 9,
    "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
}


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        ({"extra": 1}, "row keys must be exactly type, seq0, time0, data"),
        ({"seq0": -1}, "seq0 must be a non-negative safe integer"),
        ({"seq0": True}, "seq0 must be a non-negative safe integer"),
        ({"time0": 1.5}, "time0 must be a safe integer"),
        ({"data": []}, "data must be an object"),
        (
            {"data": {**VALID["data"], "x": 1}},
            "data keys must be exactly turn, step, index, dt, texts",
        ),
        ({"data": {**VALID["data"], "turn": "1"}}, "turn/step/index must be safe integers"),
        ({"data": {**VALID["data"], "texts": []}}, "texts must be a non-empty array of strings"),
        (
            {"data": {**VALID["data"], "texts": ["a", 1]}},
            "texts must be a non-empty array of strings",
        ),
        (
            {"data": {**VALID["data"], "dt": []}},
            "dt must be an array with one entry fewer than members",
        ),
        ({"data": {**VALID["data"], "dt": [0.5]}}, "dt entries must be integers"),
        ({"time0": 2**53 - 1}, "member time exceeds the safe integer range"),
        ({"data": {**VALID["data"], "dt": [2**60]}}, "dt entries must be safe integers"),
    ],
)
def test_malformed_rows_name_tag_and_reason(patch: dict[str, Any], why: str) -> None:
    with pytest.raises(MalformedStorageRowError) as caught:
        decode_record({**VALID, **patch})
    assert str(caught.value) == f"malformed text-chunks storage row: {why}"
    assert isinstance(caught.value, ValueError)


def test_malformed_tool_rows() -> None:
    row = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "id": 5, "args": ["a"]},
    }
    with pytest.raises(
        MalformedStorageRowError,
        match=r"^malformed tool-call-chunks storage row: id must be a string$",
    ):
        decode_record(row)
    row["data"] = {**row["data"], "id": "c", "name": None}
    with pytest.raises(MalformedStorageRowError, match="name must be a string"):
        decode_record(row)
    row["data"] = {"turn": 1, "step": 1, "index": 0, "dt": [], "id": "c", "texts": ["a"]}
    with pytest.raises(
        MalformedStorageRowError, match="data keys must be exactly turn, step, index, dt, id, name"
    ):
        decode_record(row)


def test_plain_records_decode_to_themselves() -> None:
    record = event(0, "turn/start", {"turn": 1})
    assert decode_record(record) == [record]


# ---- R10: lossless round trips --------------------------------------------------------------

safe = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
small = st.integers(min_value=0, max_value=3)
texts = st.text(
    alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\n", '"']), max_size=4
)


@st.composite
def streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Event streams that mix packable deltas, near-misses and other events."""
    out: list[dict[str, Any]] = []
    seq = draw(st.integers(min_value=0, max_value=2**53 - 200))
    time = draw(st.integers(min_value=0, max_value=2**40))
    for _ in range(draw(st.integers(min_value=0, max_value=24))):
        seq += draw(st.sampled_from([1, 1, 1, 1, 2]))
        time += draw(st.sampled_from([0, 1, 3, -2, 2**52]))
        if not -(2**53) < time < 2**53:
            time = 0
        kind = draw(
            st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta", "other", "usage"])
        )
        data: dict[str, Any] = {"turn": draw(small), "step": draw(small)}
        if kind == "other":
            out.append({"type": "step/start", "seq": seq, "time": time, "data": data})
            continue
        if kind == "usage":
            body: dict[str, Any] = {"type": "usage", "usage": {"inputTokens": 1}}
        elif kind == "tool-call-delta":
            body = {"type": kind, "index": draw(small), "id": draw(st.sampled_from(["a", "b"]))}
            if draw(st.booleans()):
                body["name"] = draw(st.sampled_from(["edit", "read"]))
            body["argumentsDelta"] = draw(texts)
        else:
            body = {"type": kind, "index": draw(small), "text": draw(texts)}
        data["chunk"] = body
        ev: dict[str, Any] = {"type": "assistant/chunk", "seq": seq, "time": time, "data": data}
        if draw(st.integers(min_value=0, max_value=20)) == 0:
            ev["ignorable"] = True
        out.append(ev)
    return out


@settings(max_examples=120, deadline=None)
@given(streams())
def test_packed_rows_round_trip_losslessly(events: list[dict[str, Any]]) -> None:
    records = encode_records(events, pack=True)
    decoded = decode_all(records)
    assert decoded == events
    assert [dumps(e) for e in decoded] == [dumps(e) for e in events]  # key order too
    for record in records:
        if record["type"].endswith("-chunks"):
            assert len(decode_record(record)) >= 3


@settings(max_examples=100, deadline=None)
@given(st.lists(safe, min_size=1, max_size=8), st.integers(min_value=0, max_value=2**40))
def test_time_gaps_round_trip(times: list[int], seq0: int) -> None:
    events = [chunk(seq0 + k, str(k), time=t) for k, t in enumerate(times)]
    assert decode_all(encode_records(events, pack=True)) == events
