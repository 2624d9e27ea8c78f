"""The workspace walk (docs/security.md): links resolved beneath the workspace, a folder swapped
for a symlink mid-call (TOCTOU) never reaches outside, and `write_file` fsyncs its folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plugins.demo_tools import NotFoundError, PathOutsideWorkspaceError, Workspace

SECRET = "OUTSIDE-SECRET"


@pytest.fixture
def space(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("inside", encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("doc a", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET, encoding="utf-8")
    return root


def outside_of(space: Path) -> Path:
    return space.parent / "outside"


def test_relative_links_inside_are_followed(space: Path) -> None:
    (space / "docs" / "up").symlink_to("../sub")
    (space / "alias.txt").symlink_to("docs/a.txt")
    (space / "abs").symlink_to(space / "docs")
    (space / "chain").symlink_to("abs")
    ws = Workspace(str(space))
    assert ws.read("docs/up/f.txt", 100) == "inside"
    assert ws.read("alias.txt", 100) == "doc a"
    assert ws.read("chain/a.txt", 100) == "doc a"
    assert ws.list("docs/up") == ["f.txt"]
    assert ws.list(".") == ["abs", "alias.txt", "chain", "docs/", "sub/"]  # links listed as such


def test_links_that_climb_out_are_refused(space: Path) -> None:
    outside = outside_of(space)
    (space / "docs" / "esc").symlink_to("../../outside")
    (space / "deep").symlink_to("docs/../../outside/f.txt")
    (space / "abs-out").symlink_to(outside / "f.txt")
    (space / "root-up").symlink_to(space / "..")
    ws = Workspace(str(space))
    for path in ("docs/esc/f.txt", "deep", "abs-out", "root-up/outside/f.txt", "sub/../../x"):
        with pytest.raises(PathOutsideWorkspaceError, match=f'^path "{path}" is outside'):
            ws.read(path, 100)
    with pytest.raises(PathOutsideWorkspaceError):
        ws.write("docs/esc/new.txt", "x")
    with pytest.raises(PathOutsideWorkspaceError):
        ws.list("docs/esc")
    assert sorted(os.listdir(outside)) == ["f.txt"]


def test_a_link_loop_is_one_clear_error(space: Path) -> None:
    (space / "a").symlink_to("b")
    (space / "b").symlink_to("a")
    with pytest.raises(OSError, match='path "a/x" has too many levels of symbolic links'):
        Workspace(str(space)).read("a/x", 10)


def test_not_found_and_file_in_the_middle(space: Path) -> None:
    ws = Workspace(str(space))
    with pytest.raises(NotFoundError, match=r"^file not found: sub/f\.txt/x$"):
        ws.read("sub/f.txt/x", 10)
    with pytest.raises(NotFoundError, match=r"^file not found: nope/x$"):
        ws.list("nope/x")
    with pytest.raises(NotFoundError, match=r"^file not found: x$"):
        Workspace(str(space / "missing")).read("x", 10)


def test_a_fifo_is_not_read(space: Path) -> None:
    os.mkfifo(space / "pipe")
    with pytest.raises(OSError, match='path "pipe" is not a regular file'):
        Workspace(str(space)).read("pipe", 10)


def test_write_through_an_inside_link_replaces_its_target(space: Path) -> None:
    (space / "alias.txt").symlink_to("docs/a.txt")
    (space / "docs" / "a.txt").chmod(0o640)
    assert Workspace(str(space)).write("alias.txt", "new") == 3
    assert (space / "alias.txt").is_symlink()
    assert (space / "docs" / "a.txt").read_text(encoding="utf-8") == "new"
    assert stat.S_IMODE((space / "docs" / "a.txt").stat().st_mode) == 0o640


def test_write_fsyncs_the_file_then_its_folder(
    space: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        synced.append("folder" if stat.S_ISDIR(mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    Workspace(str(space)).write("new/deep/n.txt", "x")
    assert synced == ["file", "folder"]


# -- the race: a folder swapped for a symlink to an outside folder, in a loop --------------------


class Swapper:
    """A thread that keeps swapping `space/sub` for a symlink to the outside folder and back."""

    def __init__(self, space: Path) -> None:
        self.sub = space / "sub"
        self.hold = space.parent / "sub-real"  # outside the workspace while swapped
        self.link = space.parent / "sub-link"
        self.link.symlink_to(outside_of(space))
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                os.rename(self.sub, self.hold)
                os.rename(self.link, self.sub)  # sub is now a symlink to the outside
                time.sleep(0)
                os.rename(self.sub, self.link)
                os.rename(self.hold, self.sub)
                self.swaps += 1
            except OSError:
                with contextlib.suppress(OSError):  # a write racing in: try again next round
                    self._repair()

    def _repair(self) -> None:
        """Undo a half swap (a write may have created `sub` while it was missing)."""
        if self.sub.is_symlink():
            os.rename(self.sub, self.link)
        if self.hold.exists():
            if self.sub.exists():
                shutil.rmtree(self.sub)
            os.rename(self.hold, self.sub)

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._repair()


@pytest.fixture
def swapping(space: Path) -> Iterator[Swapper]:
    with Swapper(space) as swapper:
        yield swapper


def loop_for(seconds: float, until: Callable[[], bool] = lambda: True) -> Iterator[int]:
    """At least `seconds` and 200 rounds; then on, up to 30 s, until `until()` holds (a loaded
    machine may schedule the swapper so that one outcome needs longer to show up)."""
    start = time.monotonic()
    n = 0
    while (
        time.monotonic() - start < seconds
        or n < 200
        or (not until() and time.monotonic() - start < 30)
    ):
        yield n
        n += 1


def test_reads_never_return_outside_content(space: Path, swapping: Swapper) -> None:
    ws = Workspace(str(space))
    seen = {"inside": 0, "refused": 0}
    for _ in loop_for(1.0, until=lambda: min(seen.values()) > 0):
        try:
            text = ws.read("sub/f.txt", 100)
        except (PathOutsideWorkspaceError, NotFoundError):
            seen["refused"] += 1
            continue
        assert text == "inside"
        seen["inside"] += 1
        try:
            names = ws.list("sub")
        except (PathOutsideWorkspaceError, NotFoundError):
            continue
        assert names == ["f.txt"]
    assert swapping.swaps > 0
    assert seen["inside"] > 0
    assert seen["refused"] > 0  # the race was really on


def test_writes_never_land_outside(space: Path, swapping: Swapper) -> None:
    ws = Workspace(str(space))
    outside = outside_of(space)
    refused = [0]
    for n in loop_for(1.0, until=lambda: refused[0] > 0):
        try:
            ws.write(f"sub/w{n % 5}.txt", f"write {n}")
        except (PathOutsideWorkspaceError, NotFoundError, OSError):
            refused[0] += 1
    assert swapping.swaps > 0
    assert refused[0] > 0
    assert sorted(os.listdir(outside)) == ["f.txt"]
    assert (outside / "f.txt").read_text(encoding="utf-8") == SECRET
