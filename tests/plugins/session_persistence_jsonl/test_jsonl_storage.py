"""Storage format: header line, raw lines, zstd frames, revisions, listing, version hand-off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zstandard
from jsonl_helpers import MODES, backend, chunk, event, meta, turn, write

from plugins.session.jsonutil import dumps
from plugins.session_persistence.backend import PersistenceBackend
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl.frames import scan

pytestmark = pytest.mark.anyio


def lines(*records: dict[str, object]) -> bytes:
    return b"".join(dumps(r).encode() + b"\n" for r in records)


def test_backend_satisfies_the_protocol(tmp_path: Path) -> None:
    b = backend(tmp_path, "zstd")
    assert isinstance(b, PersistenceBackend)
    assert b.name == "session-persistence-jsonl"
    with pytest.raises(ValueError, match="absolute"):
        JsonlBackend("relative/root")
    with pytest.raises(ValueError, match="compression"):
        JsonlBackend(tmp_path, compression="gzip")  # type: ignore[arg-type]


async def test_raw_log_bytes(tmp_path: Path) -> None:
    b = backend(tmp_path, "none")
    m = meta("s", cwd="/w", parentSession="p", seedLength=2, origin="subagent", agentPreset="x")
    m = {"agentPreset": "x", **m}  # input key order does not matter
    first = [event(0, "turn/start", {"turn": 1}), *[chunk(s, "ab") for s in (1, 2, 3)]]
    second = [chunk(4, "c"), event(5, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})]
    path = await write(b, m, [first, second])
    assert path == tmp_path / "sessions" / "--w--" / "s" / "session.jsonl"
    assert path.read_bytes() == (
        b'{"type":"session","version":0,"id":"s","createdAt":1000,"cwd":"/w",'
        b'"parentSession":"p","seedLength":2,"origin":"subagent","delegationDepth":0,'
        b'"agentPreset":"x"}\n'
        + lines(
            first[0],
            {
                "type": "text-chunks",
                "seq0": 1,
                "time0": 101,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["ab"] * 3},
            },
            *second,
        )
    )
    stored = await b.load_stored("s")
    assert stored is not None
    assert stored.events == first + second
    assert stored.meta == {
        **meta("s", cwd="/w"),
        "parentSession": "p",
        "seedLength": 2,
        "origin": "subagent",
        "delegationDepth": 0,
        "agentPreset": "x",
    }


async def test_pack_chunks_off_writes_every_event(tmp_path: Path) -> None:
    b = backend(tmp_path, "none", pack_chunks=False)
    events = turn(0, deltas=5)
    path = await write(b, meta(), [events])
    assert path.read_bytes().split(b"\n", 1)[1] == lines(*events)


async def test_no_cwd_project(tmp_path: Path) -> None:
    b = backend(tmp_path, "none")
    path = await write(b, meta(cwd=None), [turn(0)])
    assert path.parent.parent.name == "_no-cwd"
    stored = await b.load_stored("s1")
    assert stored is not None
    assert "cwd" not in stored.meta


async def test_zstd_frames_one_per_batch_and_plaintext_equals_raw(tmp_path: Path) -> None:
    batches = [turn(0), turn(8, 2), [event(16, "turn/start", {"turn": 3})]]
    raw = await write(backend(tmp_path / "r", "none"), meta(), batches)
    packed = await write(backend(tmp_path / "z", "zstd"), meta(), batches)
    data = packed.read_bytes()
    frames = scan(data)
    assert [f.complete for f in frames] == [True] * 4
    plain = [zstandard.ZstdDecompressor().decompress(data[f.start : f.end]) for f in frames]
    assert plain[0] == raw.read_bytes().split(b"\n", 1)[0] + b"\n"
    assert b"".join(plain) == raw.read_bytes()
    for f in frames:
        assert data[f.start + 4] & 0x04  # content checksum flag


@pytest.mark.parametrize("mode", MODES)
async def test_empty_batches_write_nothing(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    before = path.read_bytes()
    await b.append_batch(meta(), [], is_materialized=True)
    assert path.read_bytes() == before


@pytest.mark.parametrize("mode", MODES)
async def test_revisions(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    await write(b, meta(), [turn(0)])
    first = await b.read_stored_revision("s1")
    assert first is not None
    assert first == await b.read_stored_revision("s1")
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.revision == first
    st = os.stat(b.locate(meta()).path)
    assert first == f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    second = await b.read_stored_revision("s1")
    assert second not in (None, first)
    other = backend(tmp_path / "other", mode)
    await write(other, meta(), [turn(0)])
    assert await other.read_stored_revision("s1") not in (first, second)
    snapshots = await b.list_snapshots()
    assert [(s.header["id"], s.revision) for s in snapshots] == [("s1", second)]


@pytest.mark.parametrize("mode", MODES)
async def test_list_orders_by_created_at_then_id(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    for session_id, created in (("b", 5), ("a", 5), ("c", 1), ("d", 9)):
        await write(b, {**meta(session_id, cwd=f"/{session_id}"), "createdAt": created}, [turn(0)])
    headers = await b.list()
    assert [h["id"] for h in headers] == ["c", "a", "b", "d"]
    assert headers[0] == {
        "version": 0,
        "id": "c",
        "createdAt": 1,
        "cwd": "/c",
        "delegationDepth": 0,
    }


@pytest.mark.parametrize("mode", MODES)
async def test_newer_version_is_returned_for_the_coordinator_to_refuse(
    tmp_path: Path, mode: str
) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    header = b'{"type":"session","version":3,"whatever":[1]}\n'
    body = b"not even json\n"
    if mode == "zstd":
        c = zstandard.ZstdCompressor(write_checksum=True)
        path.write_bytes(c.compress(header) + c.compress(body))
    else:
        path.write_bytes(header + body)
    stored = await b.load_stored("s1")
    assert stored is not None
    assert stored.meta == {"version": 3, "whatever": [1]}
    assert stored.events == []
    assert [h["version"] for h in await b.list()] == [3]


@pytest.mark.parametrize(
    ("first_line", "why"),
    [
        (b"{oops", "header line is not valid JSON"),
        (b'{"type":"event","version":0}', "first line is not a session header"),
        (b'{"type":"session","id":"s1"}', "first line is not a session header"),
    ],
)
async def test_bad_header_is_corruption(tmp_path: Path, first_line: bytes, why: str) -> None:
    b = backend(tmp_path, "none")
    path = await write(b, meta(), [turn(0)])
    path.write_bytes(first_line + b"\n")
    with pytest.raises(SessionPersistenceCorruptionError, match=why):
        await b.load_stored("s1")
    path.write_bytes(b'{"type":"session","version":0')
    with pytest.raises(SessionPersistenceCorruptionError, match="empty or header-less session log"):
        await b.load_stored("s1")


async def test_header_id_mismatch_is_corruption_naming_the_log(tmp_path: Path) -> None:
    b = backend(tmp_path, "none")
    path = await write(b, meta(), [turn(0)])
    text = path.read_bytes().replace(b'"id":"s1"', b'"id":"s2"', 1)
    path.write_bytes(text)
    with pytest.raises(SessionPersistenceCorruptionError, match='requested id "s1" does not'):
        await b.load_stored("s1")


@pytest.mark.parametrize("mode", MODES)
async def test_creating_an_existing_log_is_refused(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    before = path.read_bytes()
    with pytest.raises(Exception, match="already has a persisted log"):
        await b.append_batch(meta(), turn(0), is_materialized=False)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, "session.lock"])


@pytest.mark.parametrize("enabled", [True, False])
def test_large_logs_pause_the_cyclic_gc_and_restore_it(
    monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    import gc

    from plugins.session_persistence_jsonl import reader

    header = b'{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0}\n'
    small = header + lines(event(0, "x/y", {}))
    large = header + lines(*[event(k, "x/y", {"pad": "p" * 100}) for k in range(10_000)])
    assert len(small) < reader.BULK_BYTES <= len(large)
    during: list[bool] = []
    inner = reader._scan_raw

    def probe(data: bytes) -> object:
        during.append(gc.isenabled())
        return inner(data)

    monkeypatch.setattr(reader, "_scan_raw", probe)
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        assert len(reader.scan_raw(large).events) == 10_000
        assert gc.isenabled() is enabled
        reader.scan_raw(small)
        assert during == [False, enabled]
    finally:
        if was:
            gc.enable()
