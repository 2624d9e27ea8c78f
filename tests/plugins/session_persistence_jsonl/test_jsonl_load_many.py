"""A listing reads the logs of a probe batch a bounded run at a time (`load_many`: one trip to
the I/O thread, one scan of the root), with the rows and errors of one read per log
(docs/performance.md); a log read straight from its descriptor is read again when it
changed meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonl_helpers import meta, open_turn, turn

import plugins.session
from apps.cli.listing import session_rows
from framework import Context
from plugins.session_persistence import (
    Config,
    SessionNotFoundError,
    SessionPersistenceCorruptionError,
    SessionPersistenceService,
    mount_persistence,
)
from plugins.session_persistence.testing import running
from plugins.session_persistence_jsonl import JsonlBackend
from plugins.session_persistence_jsonl import backend as backend_module

pytestmark = pytest.mark.anyio

NAMES = [f"s{index}" for index in range(6)]


async def populate(root: Path) -> None:
    """Six sessions: s2's turn is cut off (balanced in memory), s4's log is corrupt."""
    async with running(JsonlBackend(root, compression="none")) as world:
        for index, name in enumerate(NAMES):
            await world.service.create({**meta(name), "createdAt": 1000 + index})
            await world.service.append(name, open_turn(0) if name == "s2" else turn(0))
    log = next(root.glob("*/s4/session.jsonl"))
    lines = log.read_bytes().split(b"\n")
    lines[2] = b"{not json"  # committed: a turn/end follows it
    log.write_bytes(b"\n".join(lines))


class Counted(JsonlBackend):
    """Counts the reads: one log at a time, and in runs."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, compression="none")
        self.runs: list[int] = []
        self.singles = 0

    def _load_many(self, session_ids: list[str]) -> list[Any]:
        found = super()._load_many(session_ids)
        self.runs.append(len(found))
        return found

    def _load_stored(self, session_id: str, projects: Any = None) -> Any:
        if projects is None:
            self.singles += 1
        return super()._load_stored(session_id, projects)


async def mounted(ctx: Context, backend: JsonlBackend) -> SessionPersistenceService:
    await ctx.plugin(plugins.session)
    await ctx.plugin(lambda ctx, config: mount_persistence(ctx, backend, Config()))
    service: SessionPersistenceService = ctx.sessionPersistence
    return service


async def test_inspect_batch_answers_a_run_of_ids_in_order(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    await populate(root)
    backend = Counted(root)
    async with Context() as ctx:
        service = await mounted(ctx, backend)
        found = await service.inspect_batch([*NAMES, "missing"])
        one_by_one = [await service.inspect(name) for name in NAMES[:4]]
    assert backend.runs == [7]
    assert [type(item).__name__ for item in found] == [
        *["SessionLog"] * 4,
        "SessionPersistenceCorruptionError",
        "SessionLog",
        "SessionNotFoundError",
    ]
    assert isinstance(found[4], SessionPersistenceCorruptionError)
    assert isinstance(found[6], SessionNotFoundError)
    assert [item.events for item in found[:4]] == [log.events for log in one_by_one]  # type: ignore[union-attr]
    assert found[2].events[-1]["type"] == "turn/end"  # type: ignore[union-attr]


async def test_a_run_stops_once_its_logs_hold_the_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    await populate(root)
    size = next(root.glob("*/s0/session.jsonl")).stat().st_size
    monkeypatch.setattr(backend_module, "LOAD_MANY_BYTES", 2 * size)
    backend = Counted(root)
    async with Context() as ctx:
        service = await mounted(ctx, backend)
        first = await service.inspect_batch(NAMES)
        rest = await service.inspect_batch(NAMES[len(first) :])
    # s2's log is shorter than s0's, and s4's read fails: it counts no bytes.
    assert [len(first), len(rest)] == [2, 4]
    assert backend.singles == 0


async def test_listing_rows_read_in_runs_are_those_read_one_by_one(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    await populate(root)
    async with running(JsonlBackend(root, compression="none")) as world:  # one by one
        expected = await session_rows(world.service)
    backend = Counted(root)
    async with Context() as ctx:
        rows = await session_rows(await mounted(ctx, backend))
    assert rows == expected
    assert backend.runs == [len(NAMES)]
    assert backend.singles == 0
    by_id = {row.id: row for row in rows}
    assert by_id["s2"].state == "interrupted"
    assert "unparsable committed event at line 2" in str(by_id["s4"].problem)


async def test_a_run_stops_before_a_cached_id_which_is_answered_alone(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    await populate(root)
    backend = Counted(root)
    async with Context() as ctx:
        service = await mounted(ctx, backend)
        cached = await service.inspect("s1")
        runs = [await service.inspect_batch(NAMES[:3]), await service.inspect_batch(NAMES[1:3])]
    assert [len(found) for found in runs] == [1, 1]
    assert backend.runs == [1]  # s0 alone; s1 came from the cache
    assert runs[1][0].events == cached.events  # type: ignore[union-attr]


def test_a_log_that_grows_while_it_is_read_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"one\n")
    backend = JsonlBackend(tmp_path, compression="none")
    real = backend_module._read_all
    sizes: list[int] = []

    def growing(fd: int, size: int) -> bytes:
        sizes.append(size)
        if len(sizes) == 1:  # a writer appends between the first stat and the read
            with log.open("ab") as file:
                file.write(b"two\n")
        return real(fd, size)

    monkeypatch.setattr(backend_module, "_read_all", growing)
    read = backend._read_stable(str(log))
    assert read is not None
    assert read[0] == b"one\ntwo\n"
    assert sizes == [4, 8]
