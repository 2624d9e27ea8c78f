"""R15 on the JSONL backend: symlinked directories, foreign or loose files, and swapped files."""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jsonl_helpers import MODES, backend, meta, turn, write
from policy_probe import probe_stack

import plugins.session_persistence_jsonl as jsonl
from framework import AbortController, Context
from plugins.llm import GenerateOptions
from plugins.session_persistence import mount_persistence
from plugins.session_persistence.fsguard import ReplacedFileError, UnsafeStorageError
from plugins.session_persistence.testing import running
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.tools import ToolExecutionInput

pytestmark = pytest.mark.anyio

OTHER_UID = 65534


def calls(b: JsonlBackend) -> list[Callable[[], Awaitable[Any]]]:
    """Every way in for session "s1": read, raw read, append, lock."""
    return [
        lambda: b.load_stored("s1"),
        lambda: b.read_stored_revision("s1"),
        lambda: b.read_raw("s1"),
        lambda: b.append_batch(meta(), turn(6, 2), is_materialized=True),
        lambda: b.acquire_writer("s1"),
    ]


async def refused_everywhere(b: JsonlBackend, match: str) -> None:
    """Every call for "s1" is refused; the listing refuses too (an unsafe root) or shows one
    problem row instead of the session."""
    for call in calls(b):
        with pytest.raises(UnsafeStorageError, match=match):
            await call()
    assert re.search(match, await listed_problem(b))


async def listed_problem(b: JsonlBackend) -> str:
    """The listing's refusal: raised (an unsafe root) or its one problem row."""
    try:
        listed = await b.list()
    except UnsafeStorageError as error:
        return str(error)
    assert len(listed) == 1
    return str(listed[0]["problem"])


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", ["project", "session"])
async def test_a_symlinked_directory_below_the_root_is_refused(
    tmp_path: Path, mode: str, level: str
) -> None:
    """Nothing is read or written through the link; a create through it is refused too."""
    path = await write(backend(tmp_path, mode), meta(), [turn(0)])
    directory = path.parent if level == "session" else path.parent.parent
    outside = tmp_path / "outside"
    directory.rename(outside)
    directory.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    b = backend(tmp_path, mode)
    await refused_everywhere(b, "is a symbolic link; refusing to follow it")
    if level == "project":  # a new session of that project would be created through it
        with pytest.raises(UnsafeStorageError, match="symbolic link"):
            await b.append_batch(meta("s2"), turn(0), is_materialized=False)
    assert snapshot(outside) == before
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", ["root", "project", "session", "log", "lock"])
async def test_a_file_or_directory_of_another_user_is_refused(
    tmp_path: Path, mode: str, what: str
) -> None:
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    await b.acquire_writer("s1")
    await b.aclose()
    target = {
        "root": tmp_path / "sessions",
        "project": path.parent.parent,
        "session": path.parent,
        "log": path,
        "lock": path.parent / "session.lock",
    }[what]
    os.chown(target, OTHER_UID, OTHER_UID)
    before = snapshot(tmp_path / "sessions")
    fresh = backend(tmp_path, mode)
    expected = f'"{target}" is owned by uid {OTHER_UID}, not by this user'
    if what == "lock":  # only writers open the lock
        with pytest.raises(UnsafeStorageError, match=expected):
            await fresh.acquire_writer("s1")
        with pytest.raises(UnsafeStorageError, match=expected):
            await fresh.append_batch(meta(), turn(6, 2), is_materialized=True)
    else:
        await refused_everywhere(fresh, expected)
    assert snapshot(tmp_path / "sessions") == before
    await fresh.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_a_group_or_world_writable_log_or_directory_is_refused(
    tmp_path: Path, mode: str
) -> None:
    path = await write(backend(tmp_path, mode), meta(), [turn(0)])
    os.chmod(path, 0o666)
    b = backend(tmp_path, mode)
    with pytest.raises(UnsafeStorageError) as caught:
        await b.load_stored("s1")
    assert str(caught.value) == (
        f'session storage "{path}" is writable by group or others (mode 0666); '
        f"make it private: chmod 600 '{path}'"
    )
    os.chmod(path, 0o644)  # readable by others is not refused (a plain copy); writable is
    assert (await b.load_stored("s1")) is not None
    os.chmod(path.parent, 0o777)
    with pytest.raises(UnsafeStorageError, match=f"chmod 700 '{path.parent}'"):
        await b.load_stored("s1")
    os.chmod(path.parent, 0o700)
    os.chmod(tmp_path / "sessions", 0o775)
    await refused_everywhere(b, "is writable by group or others")
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_everything_created_is_private_under_a_hostile_umask(
    tmp_path: Path, mode: str
) -> None:
    old = os.umask(0o277)  # would leave read-only files and untraversable directories
    try:
        b = backend(tmp_path, mode)
        path = await write(b, meta(), [turn(0), turn(6, 2)])
        await b.acquire_writer("s1")
        await b.append_batch(meta(), turn(12, 3), is_materialized=True)
        await b.aclose()
    finally:
        os.umask(old)
    for directory in (path.parent, path.parent.parent, tmp_path / "sessions"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for file in (path, path.parent / "session.lock"):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("swapped", ["log", "lock", "directory"])
async def test_a_file_replaced_under_a_live_writer_fails_closed(
    tmp_path: Path, mode: str, swapped: str
) -> None:
    """`mv log x; cp -p x log` mid-turn: the writer must not go on appending to the orphan."""
    b = backend(tmp_path, mode)
    path = await write(b, meta(), [turn(0)])
    await b.acquire_writer("s1")
    await b.append_batch(meta(), turn(6, 2), is_materialized=True)  # the kept descriptor
    target = {"log": path, "lock": path.parent / "session.lock", "directory": path.parent}[swapped]
    aside = target.with_name(target.name + ".moved")
    target.rename(aside)
    if swapped == "directory":
        shutil.copytree(aside, target, copy_function=shutil.copy2)
    else:
        shutil.copy2(aside, target)
    before = snapshot(tmp_path / "sessions")
    with pytest.raises(ReplacedFileError) as caught:
        await b.append_batch(meta(), turn(12, 3), is_materialized=True)
    named = path if swapped == "directory" else target
    assert str(caught.value).startswith(f'session storage "{named}" was replaced')
    assert snapshot(tmp_path / "sessions") == before  # neither the copy nor the orphan grew
    await b.aclose()


async def test_a_replaced_log_stops_a_live_session_flush(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    async with running(JsonlBackend(root, compression="none")) as world:
        session = world.sessions.create("live", meta={"cwd": "/w", "createdAt": 1})
        session.append("turn/start", {"turn": 1})
        await world.sessions.flush(session)
        (log,) = root.rglob("session.jsonl")
        log.rename(log.with_name("x"))
        shutil.copy2(log.with_name("x"), log)
        session.append("step/start", {"turn": 1, "step": 1})
        with pytest.raises(ReplacedFileError):
            await world.sessions.flush(session)
        assert b"step/start" not in log.read_bytes() + log.with_name("x").read_bytes()
        log.unlink()
        log.with_name("x").rename(log)  # put the held file back: writes go on, once
        await world.sessions.flush(session)
        assert log.read_bytes().count(b"step/start") == 1


async def test_a_log_swapped_mid_turn_stops_the_next_request_and_tool_body(
    tmp_path: Path,
) -> None:
    """Under the checkpoint policy: after `mv log x; cp -p x log` the next barrier's flush fails
    closed, so neither the model request nor the tool body runs, and neither file grows."""
    ran: list[str] = []

    async def persistence(ctx: Context, _config: object) -> Any:
        backend = JsonlBackend(tmp_path, compression="none")
        config = jsonl.Config(
            root=str(tmp_path), compression="none", write_batch_max_delay_ms=60_000
        )
        return await mount_persistence(ctx, backend, config)

    async with probe_stack(persistence, ran) as ctx:
        session = ctx.sessions.create("swapped", meta={"cwd": str(tmp_path)})
        session.append("turn/start", {"turn": 1})
        await ctx.sessions.flush(session)
        log = Path(ctx.sessionPersistence.locate(session.header).path)
        log.rename(log.with_name("x"))
        shutil.copy2(log.with_name("x"), log)
        sizes = (log.stat().st_size, log.with_name("x").stat().st_size)

        session.append("step/start", {"turn": 1, "step": 1})
        options = GenerateOptions(provider="probe", model="m", messages=[], session_id="swapped")
        with pytest.raises(ReplacedFileError):
            async for _ in ctx.llm.stream(options):
                pass
        agent = SimpleNamespace(ctx=ctx, session=session)
        call = ToolExecutionInput(
            call_id="c1", name="probe", arguments={}, signal=AbortController().signal, agent=agent
        )
        result = await ctx.tools.execute(call)
        assert result.is_error is True
        assert "was replaced while this process held it open" in result.content[0]["text"]
        assert ran == []
        assert (log.stat().st_size, log.with_name("x").stat().st_size) == sizes
