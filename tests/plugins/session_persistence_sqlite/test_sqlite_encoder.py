"""Rows encoded ahead (`rows.Ahead`): the same rows as encoding at the write, and a live flush
that only binds what its events' admission prepared."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_helpers import chunk, db_path, event

import plugins.session
import plugins.session_persistence_sqlite
import plugins.session_persistence_sqlite.rows as rows_module
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence.packing import CHUNK_TAGS, encode_records
from plugins.session_persistence_sqlite.rows import (
    MAX_PACKED_MEMBERS,
    ZSTD_THRESHOLD,
    Ahead,
    Row,
    encode_rows,
)

JsonObject = dict[str, Any]


def reference(events: Sequence[JsonObject]) -> list[Row]:
    """The rows before they were prepared ahead: records, then each encoded with `dumps`."""
    rows: list[Row] = []
    position = 0
    for record in encode_records(events, pack=True):
        if record["type"] in CHUNK_TAGS:
            count = len(record["data"]["dt"]) + 1
            members = list(events[position : position + count])
            rows.extend(rows_module._packed_rows(members, [None] * count, record))
            position += count
        else:
            rows.append(rows_module._event_row(record))
            position += 1
    return rows


texts = st.text(alphabet=st.sampled_from(["a", '"', "\\", "\u2028", "\ud800", "\udc80", "é"]))
small = st.sampled_from([1, 1, 1, -2])  # mostly one key, so runs form
ids = st.sampled_from(["c", 'c"\ud800'])


@st.composite
def streams(draw: st.DrawFn) -> list[JsonObject]:
    """Runs of packable deltas, near-misses, events with surface keys (both orders) and large
    data."""
    out: list[JsonObject] = []
    seq = draw(st.integers(min_value=0, max_value=2**53 - 200))
    time = draw(st.integers(min_value=-(2**40), max_value=2**40))
    for _ in range(draw(st.integers(min_value=0, max_value=10))):
        kind = draw(st.sampled_from(["text-delta", "tool-call-delta", "other", "surface", "big"]))
        turn, step, index, call_id = draw(small), draw(small), draw(small), draw(ids)
        name = draw(st.one_of(st.none(), ids))
        for _ in range(draw(st.integers(min_value=1, max_value=5)) if "delta" in kind else 1):
            seq += draw(st.sampled_from([1, 1, 1, 1, 1, 2]))
            time += draw(st.sampled_from([0, 1, 3, -2]))
            data: JsonObject = {"turn": turn, "step": step}
            ev: JsonObject = {"type": "assistant/chunk", "seq": seq, "time": time, "data": data}
            if kind == "other":
                ev["type"] = "step/start"
            elif kind == "big":
                ev["type"] = "tool/result"
                data["output"] = draw(st.sampled_from(["x" * ZSTD_THRESHOLD, "\u2028" * 1100]))
            elif kind == "surface":
                ev["type"] = "user/message"
                pair = [("sourceEventSeqs", [seq - 1]), ("surfaceOp", "append")]
                for key, value in pair if draw(st.booleans()) else reversed(pair):
                    ev[key] = value
            elif kind == "tool-call-delta":
                body: JsonObject = {"type": kind, "index": index, "id": call_id}
                if name is not None:
                    body["name"] = name
                body["argumentsDelta"] = draw(texts)
                data["chunk"] = body
            else:
                data["chunk"] = {"type": kind, "index": index, "text": draw(texts)}
            if draw(st.integers(min_value=0, max_value=20)) == 0:
                ev["ignorable"] = True
            out.append(ev)
    return out


@settings(max_examples=200, deadline=None)
@given(streams(), st.data())
def test_prepared_rows_are_the_rows_encoded_at_the_write(
    events: list[JsonObject], data: st.DataObject
) -> None:
    """Whatever was admitted (all, some, none), a batch cut anywhere and a retried batch give
    the rows encoded at the write."""
    ahead = Ahead()
    admitted = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    for flag, ev in zip(admitted, events, strict=True):
        if flag:
            ahead.admit(ev)
    cut = data.draw(st.integers(min_value=0, max_value=len(events)))
    first, rest = events[:cut], events[cut:]
    assert encode_rows(first, ahead) == reference(first)
    assert encode_rows(rest, ahead) == reference(rest)
    assert encode_rows(events, ahead) == reference(events)  # taken already: encoded again


@pytest.mark.parametrize("named", [True, False])
def test_a_packed_row_from_prepared_texts_is_its_json(named: bool) -> None:
    """Strings JavaScript escapes differently in the texts, the call id and the name; negative
    times and indexes; a row amid other events."""
    events: list[JsonObject] = [event(0, "step/start", {"turn": 1, "step": 1})]
    for k in range(1, 5):
        body: JsonObject = {"type": "tool-call-delta", "index": -2, "id": "c\ud800"}
        if named:
            body["name"] = 'n"\udc80'
        body["argumentsDelta"] = f'a\udc80\u2028"\\{k}'
        data = {"turn": 1, "step": 1, "chunk": body}
        events.append({"type": "assistant/chunk", "seq": k, "time": 5 - 3 * k, "data": data})
    events.append(event(5, "step/end", {"turn": 1, "step": 1}))
    ahead = Ahead()
    for ev in events:
        ahead.admit(ev)
    rows = encode_rows(events, ahead)
    assert rows == reference(events)
    assert [row[1] for row in rows] == ["step/start", "tool-call-chunks", "step/end"]


def test_a_run_past_the_member_limit_splits_the_same_way() -> None:
    events = [chunk(seq, f"\ud800{seq}") for seq in range(MAX_PACKED_MEMBERS + 2)]
    ahead = Ahead()
    for ev in events:
        ahead.admit(ev)
    rows = encode_rows(events, ahead)
    assert rows == reference(events)
    assert [row[1] for row in rows] == ["text-chunks", "assistant/chunk", "assistant/chunk"]


def test_a_batch_all_prepared_is_taken_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """No per-event `take` for a batch whose every event was admitted, with or without a run
    of deltas; the rows are the same."""
    plain = [event(0, "step/start", {"turn": 1, "step": 1}), event(1, "step/end", {"turn": 1})]
    plain[1]["sourceEventSeqs"] = [0]
    deltas = [chunk(seq, "w") for seq in range(2, 6)]
    ahead = Ahead()
    for ev in plain + deltas:
        ahead.admit(ev)

    def refused(self: Ahead, events: Sequence[JsonObject]) -> Any:
        raise AssertionError("taken event by event")

    monkeypatch.setattr(Ahead, "take", refused)
    assert encode_rows(plain, ahead) == reference(plain)
    assert encode_rows(deltas, ahead) == reference(deltas)


def test_admit_leaves_an_unencodable_event_to_the_write() -> None:
    ahead = Ahead()
    bad = event(0, "custom/x", {"value": float("nan")})
    ahead.admit(bad)  # no raise: the write raises as it always did
    assert ahead.take([bad]) == ([None], [None], [None])
    with pytest.raises(ValueError):
        encode_rows([bad], ahead)


def test_take_skips_older_and_refuses_a_different_object() -> None:
    ahead = Ahead()
    first, second = event(0, "turn/start", {"turn": 1}), event(1, "step/start", {"turn": 1})
    ahead.admit(first)
    ahead.admit(second)
    assert ahead.take([dict(second)]) == ([None], [None], [None])  # an equal copy was not admitted
    assert ahead.take([second]) == ([rows_module._event_row(second)], [None], [None])
    assert ahead.take([first]) == ([None], [None], [None])  # dropped: older than what was taken


@pytest.mark.anyio
async def test_a_live_flush_binds_the_rows_prepared_at_admission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is serialized at the write, the write is still the backend's `append_batch`, and
    the stored rows are the ones encoded the old way."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(plugins.session_persistence_sqlite, {"path": str(db_path(tmp_path))})
        backend = ctx.sessionPersistence.backend
        real = backend.append_batch
        writes: list[list[int]] = []

        async def counted(meta: JsonObject, events: Sequence[JsonObject], **kw: Any) -> None:
            writes.append([e["seq"] for e in events])
            await real(meta, events, **kw)

        monkeypatch.setattr(backend, "append_batch", counted)
        session = ctx.sessions.create("s1", seed=[], meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        session.append("step/start", {"turn": 1, "step": 1})
        for text in ("a" * ZSTD_THRESHOLD, "b", "c"):  # a zstd row
            chunk_data = {"type": "text-delta", "index": 0, "text": text}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_data})
        session.append("step/end", {"turn": 1, "step": 1})
        encoded: list[Any] = []

        def counting(value: Any) -> str:
            encoded.append(value)
            return dumps(value)

        monkeypatch.setattr(rows_module, "dumps", counting)
        await ctx.sessions.flush(session)
        monkeypatch.undo()
        assert encoded == []
        assert writes == [[0, 1], [2, 3, 4, 5, 6]]
    with sqlite3.connect(db_path(tmp_path)) as connection:
        stored = connection.execute(
            "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable, key_order"
            " FROM events ORDER BY seq"
        ).fetchall()
    assert [tuple(row) for row in stored] == reference(session.events)


def test_large_data_is_compressed_at_the_write_not_at_admission() -> None:
    big = event(0, "custom/x", {"output": "x" * ZSTD_THRESHOLD})
    ahead = Ahead()
    ahead.admit(big)
    (row,), _, _ = ahead.take([big])
    assert row is not None
    assert row[3] == dumps(big["data"])  # left as text at admission
    ahead.admit(big)
    (stored,) = encode_rows([big], ahead)
    assert isinstance(stored[3], bytes)
    assert [stored] == reference([big])
