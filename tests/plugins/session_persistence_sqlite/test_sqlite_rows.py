"""The row codec: LEB128 zigzag-delta seq lists, column encodings, packed-row limits, scanning."""

from __future__ import annotations

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from sqlite_helpers import chunk, event, turn

import plugins.session_persistence_sqlite.rows as rows_module
from plugins.session.jsonutil import dumps, loads
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence_sqlite.rows import (
    MAX_PACKED_BYTES,
    MAX_PACKED_MEMBERS,
    decode_row,
    decode_seqs,
    encode_rows,
    encode_seqs,
    scan,
)


def test_leb128_zigzag_delta_bytes() -> None:
    assert encode_seqs([]) == b""
    assert encode_seqs([5]) == b"\x05"
    # first 5; +2 -> 4; -1 -> 1; +4 -> 8
    assert encode_seqs([5, 7, 6, 10]) == b"\x05\x04\x01\x08"
    # 300 = 0b10_0101100 -> 0xAC 0x02; then -300 -> 599 -> 0xD7 0x04
    assert encode_seqs([300, 0]) == b"\xac\x02\xd7\x04"
    assert encode_seqs([0, 64]) == b"\x00\x80\x01"  # delta 64 -> 128 needs two bytes
    assert decode_seqs(b"\xac\x02\xd7\x04") == [300, 0]


@given(st.lists(st.integers(min_value=0, max_value=2**53 - 1), max_size=30))
def test_leb128_round_trips(seqs: list[int]) -> None:
    assert decode_seqs(encode_seqs(seqs)) == seqs


def test_leb128_refuses_truncated_and_negative() -> None:
    with pytest.raises(ValueError, match="inside a varint"):
        decode_seqs(b"\x05\x80")
    with pytest.raises(ValueError, match="negative"):
        decode_seqs(b"\x01\x05")  # 1, then delta -3
    with pytest.raises(ValueError):
        encode_seqs([-1])


def surface_events() -> list[dict[str, object]]:
    message = {"id": "m", "role": "user", "content": [], "source": {"kind": "user"}}
    live = event(0, "user/message", message)
    live["sourceEventSeqs"] = []
    live["surfaceOp"] = "append"
    closer = event(1, "tool/result", {"turn": 1})
    closer["surfaceOp"] = {"op": "replace", "start": 0, "end": 0}
    closer["sourceEventSeqs"] = [0]
    ignorable = {"type": "x/new", "seq": 2, "time": 5, "data": {}, "ignorable": True}
    return [live, closer, ignorable]


def test_event_columns_and_key_order_round_trip() -> None:
    events = surface_events()
    rows = encode_rows(events)
    assert [row[1:] for row in rows] == [
        ("user/message", 100, dumps(events[0]["data"]), b"", '"append"', None, None),
        (
            "tool/result",
            101,
            '{"turn":1}',
            b"\x00",
            '{"op":"replace","start":0,"end":0}',
            None,
            1,
        ),
        ("x/new", 5, "{}", None, None, 1, None),
    ]
    decoded = [e for row in rows for e in decode_row(row)]
    assert [dumps(e) for e in decoded] == [dumps(e) for e in events]


def text_of(data: object) -> str:
    """A `data` column as JSON text (decompressing a zstd BLOB)."""
    if isinstance(data, bytes):
        return zstandard.ZstdDecompressor().decompress(data).decode()
    assert isinstance(data, str)
    return data


def test_data_of_4096_bytes_or_more_is_stored_as_zstd() -> None:
    large = event(0, "session/title", {"title": "abc " * 2000})
    small = event(1, "session/title", {"title": "é" * 2041 + "a"})  # 4095 bytes of JSON text
    exact = event(2, "session/title", {"title": "a" * 4084})  # 4096 bytes of JSON text
    assert len(dumps(small["data"]).encode()) == 4095
    assert len(dumps(exact["data"]).encode()) == 4096
    rows = encode_rows([large, small, exact])
    assert isinstance(rows[0][3], bytes)
    assert text_of(rows[0][3]) == dumps(large["data"])
    assert rows[1][3] == dumps(small["data"])
    assert isinstance(rows[2][3], bytes)
    assert [decode_row(row)[0] for row in rows] == [large, small, exact]


def test_packed_rows_have_ignorable_zero_and_respect_the_member_limit() -> None:
    events = [event(0, "turn/start", {"turn": 1})]
    events += [chunk(seq, "x") for seq in range(1, 1 + MAX_PACKED_MEMBERS + 2)]
    rows = encode_rows(events)
    assert [(row[0], row[1], row[6]) for row in rows] == [
        (0, "turn/start", None),
        (1, "text-chunks", 0),
        (1 + MAX_PACKED_MEMBERS, "assistant/chunk", None),
        (2 + MAX_PACKED_MEMBERS, "assistant/chunk", None),
    ]
    assert len(loads(text_of(rows[1][3]))["texts"]) == MAX_PACKED_MEMBERS
    assert scan(rows, len(events)) == events


def test_packed_rows_respect_the_byte_limit() -> None:
    big = "y" * (MAX_PACKED_BYTES // 6)
    events = [chunk(seq, big, kind="reasoning-delta") for seq in range(12)]
    rows = encode_rows(events)
    assert {row[1] for row in rows} == {"reasoning-chunks"}
    assert len(rows) > 1
    for row in rows:
        assert len(text_of(row[3]).encode()) <= MAX_PACKED_BYTES
    assert scan(rows, len(events)) == events


def test_a_short_rest_after_splitting_is_stored_unpacked() -> None:
    events = [chunk(seq, "z") for seq in range(MAX_PACKED_MEMBERS + 2)]
    kinds = [row[1] for row in encode_rows(events)]
    assert kinds == ["text-chunks", "assistant/chunk", "assistant/chunk"]


def bad(row: tuple[object, ...], **columns: object) -> tuple[object, ...]:
    index = {"data": 3, "seqs": 4, "op": 5, "ignorable": 6, "key_order": 7}
    out = list(row)
    for name, value in columns.items():
        out[index[name]] = value
    return tuple(out)


@pytest.mark.parametrize(
    "columns",
    [
        {"data": "{"},
        {"data": b"\x28\xb5\x2f\xfd garbage"},
        {"seqs": b"\x80"},
        {"op": "nope"},
        {"ignorable": 0},
        {"key_order": 2},
        {"key_order": 1},
    ],
)
def test_invalid_event_rows_are_refused(columns: dict[str, object]) -> None:
    (row,) = encode_rows([event(0, "turn/start", {"turn": 1})])
    with pytest.raises(ValueError):
        decode_row(bad(row, **columns))  # type: ignore[arg-type]


def test_invalid_packed_rows_are_refused() -> None:
    (row,) = encode_rows([chunk(seq, "q") for seq in range(3)])
    for columns in ({"ignorable": None}, {"data": '{"turn":1}'}, {"op": '"append"'}):
        with pytest.raises(ValueError):
            decode_row(bad(row, **columns))  # type: ignore[arg-type]


def test_scan_bad_last_row_is_corruption_never_a_torn_tail() -> None:
    """A transaction never tears: a bad last row (even after the last turn/end) is corruption."""
    events = turn(0) + turn(8, 2)
    rows = encode_rows(events)
    broken = [*rows[:-1], bad(rows[-1], data="{")]
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r"^corrupt session log: invalid committed physical row at seq 15$",
    ):
        scan(broken, len(events))  # type: ignore[arg-type]
    gap = [row for row in rows if row[0] != 10]  # step/start of turn 2 missing
    with pytest.raises(SessionPersistenceCorruptionError, match=r"at seq 10$"):
        scan(gap[:-1], len(events))
    assert scan(rows, len(events)) == events


def test_scan_corruption_before_a_valid_turn_end() -> None:
    events = turn(0) + turn(8, 2)
    rows = encode_rows(events)
    broken = [bad(row, data="{") if row[0] == 9 else row for row in rows]
    with pytest.raises(
        SessionPersistenceCorruptionError,
        match=r"^corrupt session log: invalid committed physical row at seq 9$",
    ):
        scan(broken, len(events))  # type: ignore[arg-type]
    gap = [row for row in rows if row[0] != 9]
    with pytest.raises(SessionPersistenceCorruptionError, match=r"at seq 9$"):
        scan(gap, len(events))


def test_scan_a_next_seq_other_than_the_rows_end_is_corruption() -> None:
    events = turn(0)
    rows = encode_rows(events)
    for next_seq in (len(events) - 1, len(events) + 1):
        with pytest.raises(SessionPersistenceCorruptionError, match=rf"next seq is {next_seq} "):
            scan(rows, next_seq)


_kinds = st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta", "plain"])


@given(
    st.lists(
        st.tuples(_kinds, st.text(max_size=8), st.integers(min_value=0, max_value=3)),
        max_size=40,
    )
)
def test_batches_round_trip_through_rows(items: list[tuple[str, str, int]]) -> None:
    events: list[dict[str, object]] = []
    time = 1000
    for seq, (kind, text, gap) in enumerate(items):
        time += gap
        if kind == "plain":
            item = {"type": "session/title", "seq": seq, "time": time, "data": {"title": text}}
        elif kind == "tool-call-delta":
            delta = {"type": kind, "index": 1, "id": "c", "name": "n", "argumentsDelta": text}
            item = event(seq, "assistant/chunk", {"turn": 1, "step": 1, "chunk": delta})
            item["time"] = time
        else:
            item = chunk(seq, text, kind=kind)
            item["time"] = time
        events.append(item)
    rows = encode_rows(events)
    assert sum(row[1].endswith("-chunks") for row in rows) <= len(events) // 3
    result = scan(rows, len(events))
    assert [dumps(e) for e in result] == [dumps(e) for e in events]


@pytest.mark.parametrize("named", [None, True, False])
def test_a_prepared_delta_too_few_to_pack_has_the_rows_of_encoding_at_the_write(
    named: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One or two deltas in a row are stored unpacked; their `data` is built from the text
    their admission prepared (nothing is encoded whole at the write), column for column."""
    events: list[dict[str, object]] = [event(0, "step/start", {"turn": 3, "step": 2})]
    for k in (1, 2):
        if named is None:
            body: dict[str, object] = {
                "type": "reasoning-delta",
                "index": -1,
                "text": f"r\ud800{k}",
            }
        else:
            body = {"type": "tool-call-delta", "index": 4, "id": 'c"\u2028'}
            if named:
                body["name"] = "n\udc80"
            body["argumentsDelta"] = f'{{"k":{k}}}'
        data = {"turn": 3, "step": 2, "chunk": body}
        events.append({"type": "assistant/chunk", "seq": k, "time": 10 * k, "data": data})
    events.append(event(3, "step/end", {"turn": 3, "step": 2}))
    expected = encode_rows(events)
    ahead = rows_module.Ahead()
    for ev in events:
        ahead.admit(ev)
    encoded: list[object] = []

    def counting(value: object) -> str:
        encoded.append(value)
        return dumps(value)

    monkeypatch.setattr(rows_module, "dumps", counting)
    assert encode_rows(events, ahead) == expected
    assert encoded == []
