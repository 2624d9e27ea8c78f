"""Stored events kept packed until read (docs/event-log.md, "Events in memory"): the loaded
sequence behaves as a read-only `Sequence` of fresh dicts, keeps corruption texts, and holds a
log in about its size instead of as dicts."""

from __future__ import annotations

import copy
import gc
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import plugins.session
import plugins.session_persistence_jsonl as jsonl
from framework import Context
from plugins.session import Session
from plugins.session.eventlog import EventLog, plain_events
from plugins.session.jsonutil import dumps
from plugins.session_persistence.compact import PackedEvents
from plugins.session_persistence.errors import (
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
)
from plugins.session_persistence.packing import encode_records
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import compress_frame
from plugins.session_persistence_jsonl.reader import scan_raw, scan_zstd

JsonObject = dict[str, Any]
HEADER = {"type": "session", "version": 0, "id": "s1", "createdAt": 1000}


def event(seq: int, kind: str, data: Any, **extra: Any) -> JsonObject:
    return {"type": kind, "seq": seq, "time": 100 + seq, "data": data, **extra}


def chunk(seq: int, text: str) -> JsonObject:
    delta = {"type": "text-delta", "index": 0, "text": text}
    return event(seq, "assistant/chunk", {"turn": 1, "step": 1, "chunk": delta})


def turn(start: int, deltas: int) -> list[JsonObject]:
    """A closed turn: a user message, `deltas` streamed chunks, the assistant message."""
    user = {"id": f"u{start}", "role": "user", "content": [{"type": "text", "text": "hi"}]}
    user["source"] = {"kind": "user"}
    answer = {
        "id": f"a{start}",
        "role": "assistant",
        "content": [{"type": "text", "text": "".join(f"w{k}" for k in range(deltas))}],
        "source": {"kind": "model"},
    }
    out = [
        event(start, "turn/start", {"turn": 1}),
        event(start + 1, "step/start", {"turn": 1, "step": 1}),
    ]
    out.append(event(start + 2, "user/message", user, surfaceOp="append"))
    out += [chunk(start + 3 + k, f"w{k}") for k in range(deltas)]
    seq = start + 3 + deltas
    message = {"turn": 1, "step": 1, "message": answer}
    out.append(event(seq, "assistant/message", message, surfaceOp="append"))
    out.append(event(seq + 1, "step/end", {"turn": 1, "step": 1}))
    out.append(event(seq + 2, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    return out


def log_of(turns: int, deltas: int) -> list[JsonObject]:
    events: list[JsonObject] = [event(0, "session/end-seed", {})]
    for _ in range(turns):
        events += turn(len(events), deltas)
    return events


def lines(records: Sequence[JsonObject]) -> bytes:
    return b"".join((dumps(record) + "\n").encode() for record in records)


def raw_log(events: list[JsonObject]) -> bytes:
    return lines([HEADER]) + lines(encode_records(events, pack=True))


def zstd_log(events: list[JsonObject]) -> bytes:
    """The header frame, then one frame per turn-sized slice of records."""
    records = encode_records(events, pack=True)
    frames = [compress_frame(lines([HEADER]))]
    frames += [compress_frame(lines(records[at : at + 5])) for at in range(0, len(records), 5)]
    return b"".join(frames)


EVENTS = log_of(turns=3, deltas=7)


@pytest.fixture(params=["none", "zstd"])
def stored(request: pytest.FixtureRequest) -> Sequence[JsonObject]:
    scan = scan_raw(raw_log(EVENTS)) if request.param == "none" else scan_zstd(zstd_log(EVENTS))
    assert scan.marker is None
    return scan.events


def test_the_log_is_held_packed_and_reads_as_its_events(stored: Sequence[JsonObject]) -> None:
    assert isinstance(stored, PackedEvents)
    assert len(stored) == len(EVENTS)
    assert list(stored) == EVENTS
    assert [stored[i] for i in range(len(EVENTS))] == EVENTS
    assert [stored[-i] for i in range(1, len(EVENTS) + 1)] == EVENTS[::-1]
    assert list(reversed(stored)) == EVENTS[::-1]
    with pytest.raises(IndexError):
        stored[len(EVENTS)]
    with pytest.raises(IndexError):
        stored[-len(EVENTS) - 1]


def test_equality_is_event_by_event_with_any_sequence(stored: Sequence[JsonObject]) -> None:
    assert stored == EVENTS
    assert EVENTS == stored  # noqa: SIM300 (the list on the left: the reflected ==)
    assert stored == tuple(EVENTS)
    assert stored != EVENTS[:-1]
    assert stored != [*EVENTS[:-1], {**EVENTS[-1], "time": 0}]
    assert stored != "not events"
    with pytest.raises(TypeError):
        hash(stored)


@pytest.mark.parametrize(
    "window",
    [slice(None), slice(4, 9), slice(5, 6), slice(-3, None), slice(9, 4), slice(2, None, 3)],
)
def test_slices_are_the_list_slices(stored: Sequence[JsonObject], window: slice) -> None:
    part = stored[window]
    assert list(part) == EVENTS[window]
    assert len(part) == len(EVENTS[window])
    if part:
        assert part[0] == EVENTS[window][0]
        assert part[-1] == EVENTS[window][-1]
    assert list(part[1:]) == EVENTS[window][1:]


def test_every_read_is_a_fresh_object_that_cannot_change_the_log(
    stored: Sequence[JsonObject],
) -> None:
    member = next(i for i, e in enumerate(EVENTS) if e["type"] == "assistant/chunk")
    plain = next(i for i, e in enumerate(EVENTS) if e["type"] == "user/message")
    for index in (member, member + 1, plain):
        first = stored[index]
        assert first is not stored[index]
        first["data"]["chunk" if index != plain else "content"] = "mutated"
        first["seq"] = -1
        assert stored[index] == EVENTS[index]
    for read in stored:
        read.clear()
    assert list(stored) == EVENTS


def test_deepcopy_gives_plain_data_and_copy_the_same_log(stored: Sequence[JsonObject]) -> None:
    assert copy.copy(stored) is stored
    edited = copy.deepcopy(stored)
    assert type(edited) is list
    edited[0]["time"] = 0
    assert stored == EVENTS


def test_plain_events_skip_only_the_members_of_packed_rows(stored: Sequence[JsonObject]) -> None:
    plain = dict(plain_events(stored))
    assert plain
    assert all(EVENTS[seq] == e for seq, e in plain.items())
    skipped = [e for i, e in enumerate(EVENTS) if i not in plain]
    assert skipped
    assert all(e["type"] == "assistant/chunk" for e in skipped)
    assert dict(plain_events(EVENTS)) == dict(enumerate(EVENTS))


def test_a_session_over_a_packed_log_appends_after_it(stored: Sequence[JsonObject]) -> None:
    session = Session.from_stored({"version": 0, "id": "s1", "createdAt": 1000}, stored)
    end_seed = session.events[-1]
    assert end_seed["type"] == "session/end-seed"
    assert session.events == [*EVENTS, end_seed]
    assert session.first_live_seq == len(EVENTS) + 1
    assert [m["id"] for m in session.messages()] == [
        f"{role}{start}" for start in (1, 14, 27) for role in "ua"
    ]
    appended = session.append("turn/start", {"turn": 2})
    assert session.events[-1] is appended
    assert session.events == [*EVENTS, end_seed, appended]
    assert session.events[len(EVENTS) - 1 :] == [EVENTS[-1], end_seed, appended]
    assert stored == EVENTS  # the stored part is shared, never appended to
    snapshot = EventLog(session.events)
    session.append("step/start", {"turn": 2, "step": 1})
    assert len(snapshot) == len(EVENTS) + 2


def test_a_session_over_a_packed_log_still_validates_it() -> None:
    events = log_of(turns=1, deltas=4)
    events[3]["surfaceOp"] = {"op": "replace", "start": 99, "end": 99}
    with pytest.raises(ValueError, match="is not on the surface"):
        Session.from_stored(
            {"version": 0, "id": "s1", "createdAt": 1}, scan_raw(raw_log(events)).events
        )


def test_a_gap_at_a_packed_row_names_its_line() -> None:
    events = log_of(turns=2, deltas=5)
    data = raw_log(events).replace(b'"seq0":15,', b'"seq0":16,')  # the second turn's row
    with pytest.raises(SessionPersistenceCorruptionError) as raised:
        scan_raw(data)
    assert str(raised.value) == (
        "corrupt session log: seq gap in committed region at line 12 (expected 15, got 16)"
    )


def test_a_malformed_packed_row_names_its_line() -> None:
    events = log_of(turns=2, deltas=5)
    data = raw_log(events).replace(b'"seq0":15,', b'"seq0":-15,')
    with pytest.raises(SessionPersistenceCorruptionError) as raised:
        scan_raw(data)
    assert str(raised.value) == "corrupt session log: unparsable committed event at line 12"


def test_a_torn_tail_keeps_only_the_committed_records() -> None:
    events = log_of(turns=2, deltas=5)
    data = raw_log(events)
    cut = data[: data.rindex(b'{"type":"text-chunks"') + 20]
    scan = scan_raw(cut)
    assert scan.marker is not None
    assert list(scan.events) == events[:15]


def retained_bytes_per_event(events: list[JsonObject]) -> tuple[float, float]:
    """(bytes the loaded events hold per event, log bytes per event), by tracemalloc."""
    data = raw_log(events)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        scan = scan_raw(data)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(scan.events) == len(events)
    return held / len(events), len(data) / len(events)


def test_a_loaded_log_holds_a_few_bytes_per_packed_event_not_dicts() -> None:
    # One event as dicts costs hundreds of bytes (an envelope, its data and its chunk); packed
    # it is its share of the bytes already read plus its row's index entry.
    held, on_disk = retained_bytes_per_event(log_of(turns=40, deltas=200))
    assert on_disk < 40
    assert held < 8


async def load_log(root: Path, events: list[JsonObject]) -> Any:
    """Store `events` raw in a JSONL backend under `root`, then load them through the seam."""
    meta = {"version": 0, "id": "s1", "createdAt": 1000}
    writer = JsonlBackend(root, compression="none")
    try:
        await writer.acquire_writer("s1")
        await writer.append_batch(meta, events, is_materialized=False)
    finally:
        await writer.aclose()
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(jsonl, {"root": str(root), "compression": "none"})
        return await ctx.sessionPersistence.load("s1")


@pytest.mark.anyio
async def test_an_unknown_type_anywhere_wins_over_an_earlier_invalid_event(
    tmp_path: Path,
) -> None:
    events = log_of(turns=2, deltas=4)
    del events[3]["surfaceOp"]  # invalid: a user/message must carry one
    events[-2] = event(events[-2]["seq"], "future/kind", {})
    with pytest.raises(SessionFormatUnsupportedError) as raised:
        await load_log(tmp_path, events)
    assert raised.value.code == "SESSION_FORMAT_UNSUPPORTED"
    assert '"future/kind"' in str(raised.value)


@pytest.mark.anyio
async def test_an_invalid_event_is_corruption_naming_its_seq(tmp_path: Path) -> None:
    events = log_of(turns=2, deltas=4)
    del events[3]["surfaceOp"]
    with pytest.raises(SessionPersistenceCorruptionError) as raised:
        await load_log(tmp_path, events)
    assert raised.value.code == "SESSION_CORRUPT"
    assert 'event "user/message" (seq 3) must carry a surfaceOp' in str(raised.value)


@pytest.mark.anyio
async def test_a_load_closes_an_open_turn_after_its_packed_chunks(tmp_path: Path) -> None:
    events = log_of(turns=2, deltas=6)[:-3]  # the last turn stops after its chunks
    log = await load_log(tmp_path, events)
    assert log.events[: len(events)] == events
    assert [e["type"] for e in log.events[len(events) :]] == ["step/end", "turn/end"]
    assert log.events[-1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
