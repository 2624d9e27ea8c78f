"""Layout: escaping, project slugs, hostile ids (R9), permissions, refusals, the default root."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest
from jsonl_helpers import MODES, backend, meta, turn, write

import plugins.session
from apps.cli import listing
from apps.cli.listing import session_rows
from framework import Context
from plugins.session_persistence import Config, mount_persistence
from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence.testing import running
from plugins.session_persistence_jsonl import JsonlBackend, default_root, project_dir, segment
from plugins.session_persistence_jsonl import backend as backend_module
from plugins.session_persistence_jsonl.lock import LockTable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("session_id", "expected"),
    [
        ("abc-DEF_0.9", "abc-DEF_0.9"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("a/b", "a~002Fb"),
        ("~", "~007E"),
        ("\U0001f600", "~D83D~DE00"),
        ("a\x00b", "a~0000b"),
        ("é", "~00E9"),
        ("\ud800", "~D800"),
    ],
)
def test_segment_escapes_utf16_units(session_id: str, expected: str) -> None:
    assert segment(session_id) == expected


def test_segment_refuses_empty_and_hashes_long_ids() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        segment("")
    long_id = "x" * 300
    digest = hashlib.sha256(long_id.encode("utf-16-be")).hexdigest()
    assert segment(long_id) == "x" * 180 + "~~" + digest
    assert segment("x" * 255) == "x" * 255
    escaped = segment("/" * 100)  # 500 escaped characters
    assert len(escaped) == 180 + 2 + 64


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        (None, "_no-cwd"),
        ("/home/u/my proj", "--home-u-my~0020proj--"),
        ("/", "--root--"),
        ("C:\\Users\\me", "--C-Users-me--"),
        ("//a//b/", "--a-b---"),
        ("/tmp/~x", "--tmp-~007Ex--"),
    ],
)
def test_project_dir(cwd: str | None, expected: str) -> None:
    assert project_dir(cwd) == expected


def test_project_dir_is_cut_to_255() -> None:
    name = project_dir("/" + "a" * 400)
    assert name == "--" + "a" * 251 + "--"


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    assert default_root() == tmp_path / "sessions"
    monkeypatch.delenv("DSH_HOME")
    assert default_root() == Path.home() / ".dsh" / "sessions"
    monkeypatch.setenv("DSH_HOME", "relative")
    with pytest.raises(ValueError, match="absolute"):
        default_root()


HOSTILE = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "a\x00b",
    "x" * 10_000,
    "\U0001f600 ünïcödé 会话",
    "Case",
    "case",
    "CASE",
    ".",
    "..",
    "~002E",
    "\ud800lone",
    "a:b\\c",
]


@pytest.mark.parametrize("mode", MODES)
async def test_hostile_ids_stay_inside_the_root_and_round_trip(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    root = (tmp_path / "sessions").resolve()
    paths = set()
    for session_id in HOSTILE:
        m = meta(session_id, cwd="/../../etc")
        path = await write(b, m, [turn(0)])
        assert path.resolve().is_relative_to(root)
        assert path.parent.parent.parent == tmp_path / "sessions"
        assert len(path.parent.name) <= 255
        paths.add(path)
        stored = await b.load_stored(session_id)
        assert stored is not None
        assert stored.meta["id"] == session_id
        assert stored.events == turn(0)
    assert len(paths) == len(HOSTILE)  # case variants do not collide
    assert sorted(h["id"] for h in await b.list()) == sorted(HOSTILE)
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_files_0600_dirs_0700_even_under_a_loose_umask(tmp_path: Path, mode: str) -> None:
    old = os.umask(0)
    try:
        b = backend(tmp_path, mode)
        path = await write(b, meta(), [turn(0), turn(6, 2)])
    finally:
        os.umask(old)
    for directory in (path.parent, path.parent.parent, tmp_path / "sessions"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    await b.acquire_writer("s1")
    assert stat.S_IMODE((path.parent / "session.lock").stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(["session.lock", path.name])
    await b.aclose()


def assert_problem_row(headers: list[dict[str, object]], problem: str) -> None:
    """The listing goes on past a refused entry: it shows up as a row with its problem."""
    marked = [h for h in headers if problem in str(h.get("problem", ""))]
    assert len(marked) == 1, headers
    assert marked[0]["createdAt"] == 0


@pytest.mark.parametrize("mode", MODES)
async def test_one_bad_entry_does_not_hide_the_others(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    await write(b, meta("good", cwd="/a"), [turn(0)])
    bad = await write(b, meta("bad", cwd="/b"), [turn(0)])
    (bad.parent / ("session.jsonl" if mode == "zstd" else "session.jsonl.zstd")).write_bytes(b"")
    headers = await b.list()
    assert [h["id"] for h in headers] == ["bad", "good"]
    assert "problem" not in headers[1]
    assert str(headers[0]["problem"]).startswith(f'session artifact "{bad.parent}/session.jsonl')
    with pytest.raises(SessionPersistenceError, match="but this backend is configured for"):
        await b.load_stored("bad")  # the marked id still refuses to load


@pytest.mark.parametrize("mode", MODES)
async def test_symlinked_session_file_is_refused(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    before = path.read_bytes()
    target = tmp_path / "elsewhere"
    path.rename(target)
    path.symlink_to(target)
    with pytest.raises(SessionPersistenceError, match="symbolic link"):
        await b.load_stored("s1")
    assert_problem_row(await b.list(), "symbolic link")
    with pytest.raises(SessionPersistenceError, match="symbolic link"):
        await b.append_batch(meta(), turn(6, 2), is_materialized=True)
    with pytest.raises(SessionPersistenceError, match="symbolic link"):
        await b.read_raw("s1")
    assert target.read_bytes() == before
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_other_encoding_in_the_root_is_refused(tmp_path: Path, mode: str) -> None:
    other = "zstd" if mode == "none" else "none"
    await write(backend(tmp_path, other), meta(), [turn(0)])
    b = backend(tmp_path, mode)
    for call in (b.load_stored("s1"), b.read_stored_revision("s1")):
        with pytest.raises(SessionPersistenceError, match="but this backend is configured for"):
            await call
    assert_problem_row(await b.list(), "but this backend is configured for")
    with pytest.raises(SessionPersistenceError, match="but this backend is configured for"):
        await b.append_batch(meta(), turn(0), is_materialized=False)


@pytest.mark.parametrize("mode", MODES)
async def test_flat_log_file_is_refused(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    flat = path.parent.parent / ("s2.jsonl.zstd" if mode == "zstd" else "s2.jsonl")
    flat.write_bytes(path.read_bytes())
    with pytest.raises(SessionPersistenceError, match="uses the unsupported flat-file layout"):
        await b.load_stored("s2")
    assert_problem_row(await b.list(), "uses the unsupported flat-file layout")


@pytest.mark.parametrize("mode", MODES)
async def test_one_id_in_two_project_dirs_is_refused(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    await write(b, meta(cwd="/a"), [turn(0)])
    with pytest.raises(SessionPersistenceError, match="already stored under another project"):
        await b.append_batch(meta(cwd="/b"), turn(0), is_materialized=False)
    elsewhere = await write(backend(tmp_path / "x", mode), meta(cwd="/b"), [turn(0)])
    elsewhere.parent.parent.rename(tmp_path / "sessions" / "--b--")
    with pytest.raises(SessionPersistenceError, match="appears in multiple project directories"):
        await b.load_stored("s1")
    assert_problem_row(await b.list(), "appears in multiple project directories")


@pytest.mark.parametrize("mode", MODES)
async def test_header_must_reproduce_its_location(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(cwd="/a"), [turn(0)])
    moved = tmp_path / "sessions" / "--b--" / "s1"
    moved.parent.mkdir()
    path.parent.rename(moved)
    with pytest.raises(SessionPersistenceError, match="and cwd identify"):
        await b.load_stored("s1")
    assert_problem_row(await b.list(), "and cwd identify")


async def test_nothing_stored(tmp_path: Path) -> None:
    b = backend(tmp_path, "zstd")
    assert await b.load_stored("nope") is None
    assert await b.read_stored_revision("nope") is None
    assert await b.list() == []
    assert await b.list_snapshots() == []
    with pytest.raises(SessionPersistenceError, match='session "nope" not found'):
        await b.read_raw("nope")
    assert not (tmp_path / "sessions").exists()


@pytest.mark.parametrize("mode", MODES)
async def test_log_removed_while_listed_is_skipped(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = backend(tmp_path, mode)
    gone = await write(b, meta("gone"), [turn(0)])
    await write(b, meta("kept"), [turn(0)])
    real_open = os.open

    def removed_before_open(path: str, flags: int, *args: int) -> int:
        if os.fspath(path) == str(gone):
            os.unlink(path)  # between the first lstat and the open
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", removed_before_open)
    assert [header["id"] for header in await b.list()] == ["kept"]


@pytest.mark.parametrize("mode", MODES)
async def test_dsh_sessions_rows_mark_the_refused_entry(tmp_path: Path, mode: str) -> None:
    """`dsh sessions` (its row builder) lists every readable session and marks the bad one,
    whether the listing or the later inspect finds the problem."""
    root = tmp_path / "sessions"
    async with running(JsonlBackend(root, compression=mode)) as world:  # type: ignore[arg-type]
        for name in ("good", "misplaced", "linked"):
            await world.service.create({**meta(name), "cwd": f"/{name}"})
            await world.service.append(name, turn(0))
    (root / "--misplaced--").rename(root / "--elsewhere--")
    outside = tmp_path / "outside"
    (root / "--linked--").rename(outside)
    (root / "--linked--").symlink_to(outside, target_is_directory=True)
    async with running(JsonlBackend(root, compression=mode)) as world:  # type: ignore[arg-type]
        rows = {row.id: row for row in await session_rows(world.service)}
    assert set(rows) == {"good", "misplaced", "--linked--"}
    assert rows["good"].problem is None
    assert rows["good"].events == len(turn(0))
    assert "and cwd identify" in str(rows["misplaced"].problem)
    assert "is a symbolic link" in str(rows["--linked--"].problem)


async def test_dsh_sessions_rows_probe_owners_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the bare backend (its batch probe: one read of the lock table per `PROBE_BATCH`
    sessions) the rows are those of the one-by-one probe, the refused entry's included."""
    root = tmp_path / "sessions"
    names = [f"s{index:03d}" for index in range(listing.PROBE_BATCH + 1)]
    async with running(JsonlBackend(root, compression="none")) as world:
        for name in [*names, "misplaced"]:
            await world.service.create({**meta(name), "cwd": f"/{name}"})
            await world.service.append(name, turn(0))
    (root / "--misplaced--").rename(root / "--elsewhere--")
    async with running(JsonlBackend(root, compression="none")) as world:  # one by one
        expected = await session_rows(world.service)
    reads: list[None] = []
    real = backend_module.lock_table

    def lock_table() -> LockTable:
        reads.append(None)
        return real()

    monkeypatch.setattr(backend_module, "lock_table", lock_table)
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        bare = JsonlBackend(root, compression="none")
        fiber = ctx.plugin(lambda ctx, config: mount_persistence(ctx, bare, Config()))
        await fiber
        rows = await session_rows(ctx.sessionPersistence)
    assert len(reads) == 2
    assert rows == expected
    assert "and cwd identify" in str({row.id: row for row in rows}["misplaced"].problem)
