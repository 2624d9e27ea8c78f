"""Lines encoded ahead (`encoder.Ahead`): the same bytes as encoding at the write, and a live
flush that only joins what its events' admission prepared."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonl_helpers import chunk, event
from test_jsonl_packing import streams, texts

import plugins.session
import plugins.session_persistence_jsonl
import plugins.session_persistence_jsonl.encoder as encoder_module
from framework import Context
from plugins.session.jsonutil import dumps
from plugins.session_persistence.config import Config
from plugins.session_persistence.packing import encode_records, member_line
from plugins.session_persistence.service import mount_persistence
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.encoder import Ahead, batch_text
from plugins.session_persistence_jsonl.fileops import FileOps


def reference(events: list[dict[str, Any]], pack: bool) -> str:
    """The encoding before lines were prepared ahead: records, then one line each."""
    if not events:
        return ""
    return "\n".join(map(dumps, encode_records(events, pack=pack))) + "\n"


@settings(max_examples=150, deadline=None)
@given(streams(), st.data(), st.booleans())
def test_prepared_lines_give_the_same_bytes(
    events: list[dict[str, Any]], data: st.DataObject, pack: bool
) -> None:
    """Whatever was admitted (all, some, none; older events never admitted, a batch cut
    anywhere, a retried batch), the text is the one encoded at the write."""
    ahead = Ahead(pack=pack)
    admitted = data.draw(st.lists(st.booleans(), min_size=len(events), max_size=len(events)))
    for flag, ev in zip(admitted, events, strict=True):
        if flag:
            ahead.admit(ev)
    cut = data.draw(st.integers(min_value=0, max_value=len(events)))
    first, rest = events[:cut], events[cut:]
    assert batch_text(first, pack=pack, ahead=ahead) == reference(first, pack)
    assert batch_text(rest, pack=pack, ahead=ahead) == reference(rest, pack)
    # A retry of a batch whose prepared lines were taken encodes it again, identically.
    assert batch_text(events, pack=pack, ahead=ahead) == reference(events, pack)


def test_take_skips_older_and_refuses_a_different_object() -> None:
    ahead = Ahead(pack=True)
    first, second = event(0, "turn/start", {"turn": 1}), event(1, "step/start", {"turn": 1})
    ahead.admit(first)
    ahead.admit(second)
    assert ahead.take([dict(second)]) == ([None], [None], [None])  # an equal copy was not admitted
    assert ahead.take([second]) == ([dumps(second)], [None], [None])
    assert ahead.take([first]) == ([None], [None], [None])  # dropped: older than what was taken


def test_admit_leaves_an_unencodable_event_to_the_write() -> None:
    ahead = Ahead(pack=True)
    bad = event(0, "custom/x", {"value": float("nan")})
    ahead.admit(bad)  # no raise: the write raises as it always did
    assert ahead.take([bad]) == ([None], [None], [None])
    with pytest.raises(ValueError):
        batch_text([bad], pack=True, ahead=ahead)


def test_a_packable_delta_is_keyed_and_its_text_encoded_at_admission() -> None:
    ahead = Ahead(pack=True)
    delta = chunk(0, 'a"\u2028')
    ahead.admit(delta)
    (line,), (member,), (text,) = ahead.take([delta])
    assert line is None
    assert member is not None
    assert text == dumps('a"\u2028')


@pytest.mark.parametrize("named", [True, False])
def test_a_row_joined_from_prepared_texts_is_its_json(named: bool) -> None:
    """Strings JavaScript escapes differently (lone surrogates, quotes, U+2028) in the texts,
    the call id and the name; negative times; a row amid other events."""
    events: list[dict[str, Any]] = [event(0, "step/start", {"turn": 1, "step": 1})]
    for k in range(1, 5):
        body: dict[str, Any] = {"type": "tool-call-delta", "index": -2, "id": "c\ud800"}
        if named:
            body["name"] = 'n"\udc80'
        body["argumentsDelta"] = f'a\udc80\u2028"\\{k}'
        data = {"turn": 1, "step": 1, "chunk": body}
        events.append({"type": "assistant/chunk", "seq": k, "time": 5 - 3 * k, "data": data})
    events.append(event(5, "step/end", {"turn": 1, "step": 1}))
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    assert batch_text(events, pack=True, ahead=ahead) == reference(events, True)
    texts = [chunk(k, f"t\ud83d{k}") for k in range(3)]
    for ev in texts:
        ahead.admit(ev)
    assert batch_text(texts, pack=True, ahead=ahead) == reference(texts, True)


@pytest.mark.parametrize("kind", ["text", "reasoning", "named call", "call"])
def test_a_delta_too_few_to_pack_is_written_from_its_prepared_text(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of one or two deltas is stored unpacked; its line is built from the text JSON
    its admission prepared (no `dumps` of the whole event at the write), byte for byte."""
    if kind in ("text", "reasoning"):
        bodies: list[dict[str, Any]] = [
            {"type": f"{kind}-delta", "index": -3, "text": f'x\ud800"\u2028{k}'} for k in (1, 2)
        ]
    else:
        bodies = []
        for k in (1, 2):
            body: dict[str, Any] = {"type": "tool-call-delta", "index": 7, "id": 'c"\udc80'}
            if kind == "named call":
                body["name"] = "n\u2029"
            body["argumentsDelta"] = f'{{"a":{k}}}'
            bodies.append(body)
    events: list[dict[str, Any]] = [event(0, "step/start", {"turn": 2, "step": 9})]
    for k, body in enumerate(bodies, start=1):
        data = {"turn": 2, "step": 9, "chunk": body}
        events.append({"type": "assistant/chunk", "seq": k, "time": -4 * k, "data": data})
    events.append(event(3, "step/end", {"turn": 2, "step": 9}))
    expected = reference(events, True)
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    encoded: list[object] = []

    def counting(value: object) -> str:
        encoded.append(value)
        return dumps(value)

    monkeypatch.setattr(encoder_module, "dumps", counting)
    assert batch_text(events, pack=True, ahead=ahead) == expected
    assert encoded == []


def test_a_short_run_closed_by_another_event_gets_its_lines_at_admission(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two deltas then another event: their lines are made when that event is admitted, so
    the write builds none; so are a lone delta's when a delta of another key follows it. A run
    of three keeps only its texts (it packs); a run still open at the write is built there. The
    bytes are those encoded at the write."""
    reasoning = chunk(5, "r", kind="reasoning-delta")
    events = [
        event(0, "step/start", {"turn": 1, "step": 1}),
        chunk(1, "a"),
        chunk(2, "b"),
        event(3, "step/end", {"turn": 1, "step": 1}),
        chunk(4, "c"),
        reasoning,
        chunk(6, "d"),
        chunk(7, "e"),
        chunk(8, "f"),
        event(9, "step/end", {"turn": 1, "step": 1}),
        chunk(10, "g"),
    ]
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    built: list[int] = []

    def counting(ev: dict[str, Any], member: Any, text: str) -> str:
        built.append(ev["seq"])
        return member_line(ev, member, text)

    monkeypatch.setattr(encoder_module, "member_line", counting)
    assert batch_text(events, pack=True, ahead=ahead) == reference(events, True)
    assert built == [10]


@st.composite
def runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Streams of long delta runs of one key broken every way `packing` breaks a run: another
    key, another event, a seq gap, an unsafe time gap."""
    out: list[dict[str, Any]] = []
    seq, time = 0, 0
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        cut = draw(st.sampled_from(["key", "event", "seq", "time", "none"]))
        if cut == "event":
            out.append({"type": "step/end", "seq": seq, "time": time, "data": {"turn": 1}})
            seq += 1
        seq += cut == "seq"
        time = (-(2**52) if time > 0 else 2**52) if cut == "time" else time
        index = draw(st.integers(min_value=0, max_value=1)) if cut == "key" else 0
        for _ in range(draw(st.integers(min_value=1, max_value=9))):
            out.append(chunk(seq, draw(texts), time=time))
            out[-1]["data"]["chunk"]["index"] = index
            seq += 1
            time += draw(st.sampled_from([0, 1, -3]))
    return out


@settings(max_examples=200, deadline=None)
@given(st.one_of(streams(), runs()), st.data(), st.booleans())
def test_batches_all_prepared_are_cut_from_the_runs_as_admitted(
    events: list[dict[str, Any]], data: st.DataObject, pack: bool
) -> None:
    """Events admitted in steps and written in batches that may end anywhere (a run cut by a
    batch, then continued by admissions after the write): every batch is written from what
    was prepared, without the packing walk or any `dumps`, and its bytes are the ones encoded
    at the write."""
    ahead = Ahead(pack=pack)
    admitted = written = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoder_module, "pack_records", None)
        patch.setattr(encoder_module, "dumps", None)
        while written < len(events):
            if admitted < len(events):
                step = data.draw(st.integers(min_value=1, max_value=len(events) - admitted))
                for ev in events[admitted : admitted + step]:
                    ahead.admit(ev)
                admitted += step
            end = data.draw(st.integers(min_value=written + 1, max_value=admitted))
            batch = events[written:end]
            assert batch_text(batch, pack=pack, ahead=ahead) == reference(batch, pack)
            written = end


def test_take_all_puts_back_a_batch_that_is_not_the_one_admitted() -> None:
    """A batch whose middle event is not the object admitted is not taken whole: its entries
    go back, and `take` finds the others."""
    events = [event(0, "step/start", {"turn": 1}), chunk(1, "a"), chunk(2, "b")]
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    batch = [events[0], dict(events[1]), events[2]]
    assert ahead.take_all(batch) is None
    lines, members, _ = ahead.take(batch)
    assert lines == [dumps(events[0]), None, None]
    assert members[1] is None
    assert members[2] is not None
    assert batch_text(batch, pack=True) == reference(batch, True)


@pytest.mark.anyio
async def test_live_flush_joins_the_lines_prepared_at_admission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(
            plugins.session_persistence_jsonl, {"root": str(tmp_path), "compression": "none"}
        )
        session = ctx.sessions.create("s1", seed=[], meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        session.append("step/start", {"turn": 1, "step": 1})
        for text in ("a", "b", "c"):
            chunk_data = {"type": "text-delta", "index": 0, "text": text}
            session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk_data})
        session.append("step/end", {"turn": 1, "step": 1})
        encoded: list[Any] = []

        def counting(value: Any) -> str:
            encoded.append(value)
            return dumps(value)

        monkeypatch.setattr(encoder_module, "dumps", counting)
        await ctx.sessions.flush(session)
        # Nothing is serialized at the write: every line, and the packed row's texts, were ready.
        assert encoded == []
        path = Path(ctx.sessionPersistence.locate(dict(session.header)).path)
        lines = path.read_text().splitlines()
        assert lines[2:] == [dumps(e) for e in encode_records(session.events[1:], pack=True)]


class _HeldFsync(FileOps):
    """`fsync` waits for `release` once `hold` is set (the write is then in flight)."""

    def __init__(self) -> None:
        self.hold = False
        self.started = threading.Event()
        self.release = threading.Event()

    def fsync(self, fd: int) -> None:
        if self.hold:
            self.started.set()
            self.release.wait(10)
        super().fsync(fd)


@pytest.mark.anyio
async def test_a_cancelled_live_flush_still_completes_its_write(tmp_path: Path) -> None:
    """The encoder's write is not shielded by the coordinator: its own shielded wait keeps a
    cancelled flush's write whole, and the cursor follows it."""
    ops = _HeldFsync()
    jsonl = JsonlBackend(tmp_path, compression="none", fileops=ops)

    async def persistence(ctx: Context, config: object) -> Any:
        return await mount_persistence(ctx, jsonl, Config())

    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(persistence)
        session = ctx.sessions.create("s1", seed=[], meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        session.append("step/start", {"turn": 1, "step": 1})
        ops.hold = True
        async with anyio.create_task_group() as group:
            group.start_soon(ctx.sessions.flush, session)
            await anyio.to_thread.run_sync(ops.started.wait, 10)
            group.cancel_scope.cancel()  # the write in flight completes all the same
            ops.release.set()
        ops.hold = False
        session.append("step/end", {"turn": 1, "step": 1})
        await ctx.sessions.flush(session)
        path = Path(jsonl.locate(dict(session.header)).path)
        lines = path.read_text().splitlines()
        assert lines[1:] == [dumps(e) for e in session.events]


@pytest.mark.anyio
async def test_a_live_write_is_still_an_append_batch_of_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wrapping the instance's `append_batch` sees every live write (and the wrapped call still
    gets the prepared lines)."""
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        await ctx.plugin(
            plugins.session_persistence_jsonl, {"root": str(tmp_path), "compression": "none"}
        )
        backend = ctx.sessionPersistence.backend
        real = backend.append_batch
        seen: list[list[int]] = []

        async def append_batch(meta: Any, events: Any, *, is_materialized: bool) -> None:
            await real(meta, events, is_materialized=is_materialized)
            seen.append([event["seq"] for event in events])

        backend.append_batch = append_batch
        session = ctx.sessions.create("s1", seed=[], meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        session.append("step/start", {"turn": 1, "step": 1})  # its line is made here
        encoded: list[Any] = []
        monkeypatch.setattr(encoder_module, "dumps", lambda v: encoded.append(v) or dumps(v))
        await ctx.sessions.flush(session)
        assert seen == [[0, 1], [2]]
        assert encoded == []
