"""R11: after a power cut only what was fsynced survives; every acknowledged event still loads.

The write path is instrumented where the bytes meet the disk: JSONL through a `FileOps` that
records the content of each file at each `fsync` (and what a directory `fsync` made durable of a
link), SQLite by copying the database and its WAL when each commit is acknowledged. From those
records each test rebuilds the images a power cut can leave after acknowledgement `k`: exactly
the synced bytes, the synced bytes plus a cut piece of the next (unsynced) write, and the synced
bytes plus a zero-filled tail (ext4/XFS commit the new size before the data). Each image is
loaded by a fresh backend through the persistence service (which repairs it): the acknowledged
events must all be there, followed by nothing that was never written.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plugins.session_persistence.backend import PersistenceBackend
from plugins.session_persistence.testing import (
    complete_turn,
    event,
    meta,
    open_tool_turn,
    running,
    texts,
)
from plugins.session_persistence_jsonl import FileOps, JsonlBackend
from plugins.session_persistence_sqlite import SqliteBackend

pytestmark = pytest.mark.anyio

JsonObject = dict[str, Any]
SESSION = "power"


def chunks(start: int, count: int, turn: int) -> list[JsonObject]:
    """Streaming text deltas (packed into one row when three or more)."""
    return [
        event(
            start + k,
            "assistant/chunk",
            {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": f"t{k}"}},
        )
        for k in range(count)
    ]


def batches() -> list[list[JsonObject]]:
    """Seven durable batches: closed turns, streaming deltas and an open tool call."""
    first = complete_turn(0, 1)
    second = open_tool_turn(6, 2, started=False)[:3]
    out = [first, second, chunks(9, 5, 2), chunks(14, 1, 2)]
    third = complete_turn(15, 3)
    out += [third[:2], third[2:], open_tool_turn(21, 4, started=True)]
    seq = 0
    for batch in out:
        for item in batch:
            assert item["seq"] == seq
            seq += 1
    return out


class SyncRecorder(FileOps):
    """`FileOps` that remembers what each `fsync` made durable, per path."""

    def __init__(self) -> None:
        self.paths: dict[int, str] = {}
        self.synced: dict[str, bytes] = {}
        self.linked: dict[str, str] = {}  # target -> source, durable at the directory's fsync

    def open(self, path: str, flags: int, mode: int = 0o600) -> int:
        fd = super().open(path, flags, mode)
        self.paths[fd] = path
        return fd

    def close(self, fd: int) -> None:
        self.paths.pop(fd, None)
        super().close(fd)

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        path = self.paths.get(fd)
        if path is not None:
            self.synced[path] = Path(path).read_bytes()[: os.fstat(fd).st_size]

    def link(self, source: str, target: str) -> None:
        super().link(source, target)
        self.linked[target] = source

    def fsync_dir(self, path: str) -> None:
        super().fsync_dir(path)
        for target, source in list(self.linked.items()):
            if os.path.dirname(target) == path:
                self.synced[target] = self.synced[source]
                del self.linked[target]


def tails(synced: bytes, written: bytes) -> Iterator[tuple[str, bytes]]:
    """The images of a cut after `synced` was durable while `written` (its extension) was in
    flight: nothing more, a cut piece of the extension, or a zero-filled extension."""
    assert written.startswith(synced)
    extra = len(written) - len(synced)
    yield "synced", synced
    for cut in sorted({1, extra // 3, extra // 2, extra - 1}):
        if 0 < cut < extra:
            yield f"cut {cut}", written[: len(synced) + cut]
            yield f"cut {cut} + zeros", written[: len(synced) + cut] + b"\x00" * (extra - cut)
    if extra:
        yield "zeros", synced + b"\x00" * extra


async def check_image(
    fresh: PersistenceBackend, acknowledged: list[JsonObject], label: str
) -> None:
    """Load (and so repair) the image: the acknowledged events, then only closers or events of
    the next batch."""
    async with running(fresh) as world:
        log = await world.service.load(SESSION)
    got = texts(log.events)
    assert got[: len(acknowledged)] == texts(acknowledged), label
    later = log.events[len(acknowledged) :]
    assert all(item["seq"] == len(acknowledged) + i for i, item in enumerate(later)), label


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_jsonl_power_cut_images(tmp_path: Path, compression: str) -> None:
    recorder = SyncRecorder()
    root = tmp_path / "live"
    live = JsonlBackend(root, compression=compression, fileops=recorder)  # type: ignore[arg-type]
    acks: list[tuple[list[JsonObject], bytes]] = []
    written: list[JsonObject] = []
    async with running(live) as world:
        await world.service.create(meta(SESSION))
        path = ""
        for batch in batches():
            await world.service.append(SESSION, batch)
            written += batch
            path = live.locate(meta(SESSION)).path
            acks.append((list(written), recorder.synced[path]))
    final = Path(path).read_bytes()
    assert acks[-1][1] == final
    relative = Path(path).relative_to(root)
    images = 0
    for index, (acknowledged, synced) in enumerate(acks):
        nxt = acks[index + 1][1] if index + 1 < len(acks) else synced
        for label, image in tails(synced, nxt):
            target = tmp_path / f"image-{images}"
            (target / relative).parent.mkdir(mode=0o700, parents=True)
            (target / relative).write_bytes(image)
            os.chmod(target / relative, 0o600)
            fresh = JsonlBackend(target, compression=compression)  # type: ignore[arg-type]
            await check_image(fresh, acknowledged, f"ack {index}, {label}")
            images += 1
    assert images > 3 * len(acks)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def reboot(database: Path) -> None:
    """What a reboot does to an image: the writer that held a lock row is gone (a cut can fall
    between the commit taking a transient lock and the one freeing it)."""
    with sqlite3.connect(database, isolation_level=None) as connection:
        connection.execute("UPDATE session_locks SET pid = ?", (dead_pid(),))
    connection.close()


async def test_sqlite_power_cut_images(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    folder.mkdir(mode=0o700)
    database = folder / "sessions.sqlite3"
    wal = Path(f"{database}-wal")
    acks: list[tuple[list[JsonObject], bytes, bytes]] = []
    written: list[JsonObject] = []
    async with running(SqliteBackend(database)) as world:
        await world.service.create(meta(SESSION))
        for batch in batches():
            await world.service.append(SESSION, batch)
            written += batch
            acks.append((list(written), database.read_bytes(), wal.read_bytes()))
    images = 0
    for index, (acknowledged, db, synced) in enumerate(acks):
        nxt = acks[index + 1][2] if index + 1 < len(acks) else synced
        if not nxt.startswith(synced):  # a checkpoint restarted the WAL in between
            nxt = synced
        for label, image in tails(synced, nxt):
            target = tmp_path / f"image-{images}"
            target.mkdir(mode=0o700)
            copy = target / "sessions.sqlite3"
            copy.write_bytes(db)
            Path(f"{copy}-wal").write_bytes(image)
            for name in (copy, Path(f"{copy}-wal")):
                os.chmod(name, 0o600)
            reboot(copy)
            await check_image(SqliteBackend(copy), acknowledged, f"ack {index}, {label}")
            shutil.rmtree(target)
            images += 1
    assert images > 3 * len(acks)
