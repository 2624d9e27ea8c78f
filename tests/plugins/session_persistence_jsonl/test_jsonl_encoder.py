"""Lines encoded ahead (`encoder.Ahead`): the same bytes as encoding at the write, and a live
flush that only joins what its events' admission prepared."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonl_helpers import chunk, event
from test_jsonl_packing import streams

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
    the write builds none. A run of three keeps only its texts (it packs); a run closed by a
    delta of another key (a delta's admission looks at nothing behind it) and a run still open
    at the write are built there. The bytes are those encoded at the write."""
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
    assert built == [4, 5, 10]


class TakenDuringTheWalk(deque[list[Any]]):
    """A queue from which the I/O thread takes the head while the loop walks it backwards."""

    def __reversed__(self) -> Iterator[list[Any]]:
        walk = super().__reversed__()
        self.popleft()
        return walk


def test_a_write_taking_entries_during_the_short_run_walk_costs_no_bytes() -> None:
    """The walk that encodes a closed short run meets a queue the I/O thread just changed:
    the closing event is left to the write, which encodes it there, and the bytes are the
    same as encoding everything at the write."""
    events = [event(0, "step/start", {"turn": 1, "step": 1}), chunk(1, "a"), chunk(2, "b")]
    closing = event(3, "step/end", {"turn": 1, "step": 1})
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    racing = TakenDuringTheWalk(ahead._ready)
    ahead._ready = racing
    ahead.admit(closing)  # the walk raises inside admit, which must not
    assert [entry[0]["seq"] for entry in racing] == [1, 2]  # nothing admitted for seq 3
    rest = [*events[1:], closing]
    encoded, _, _ = ahead.take(rest)
    assert encoded[-1] is None  # the write encodes the closing event itself
    ahead = Ahead(pack=True)
    for ev in events:
        ahead.admit(ev)
    ahead._ready = TakenDuringTheWalk(ahead._ready)
    ahead.admit(closing)
    assert batch_text(rest, pack=True, ahead=ahead) == reference(rest, True)


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
