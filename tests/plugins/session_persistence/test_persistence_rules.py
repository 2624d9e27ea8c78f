"""The storage rules the seam holds once for every backend, and the seam's own shape."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import plugins.session_persistence as seam
from framework import DshError
from plugins.session_persistence import errors
from plugins.session_persistence.header import (
    header_columns,
    meta_of,
    meta_of_columns,
    stored_header,
)
from plugins.session_persistence.home import absolute_path, dsh_home
from plugins.session_persistence.liveness import HOST, holder_gone, pid_alive
from plugins.session_persistence.records import RecordSequence
from plugins.session_persistence.testing import FIXTURE_NAMES, FIXTURES, event


def _gap(expected: int, got: str) -> str:
    return f"gap: expected {expected}, got {got}"


def _end(seq: int) -> dict[str, object]:
    return event(seq, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})


# -- records ----------------------------------------------------------------------------------


def test_appended_storage_a_bad_record_without_a_later_turn_end_ends_the_prefix() -> None:
    records = RecordSequence(can_tear=True, gap=_gap)
    assert records.add([event(0, "turn/start", {"turn": 1})])
    records.bad("bad 2")
    assert records.torn
    assert not records.add([event(1, "step/start", {})])  # after the tear: dropped
    records.bad("bad 4")
    assert [e["seq"] for e in records.events] == [0]


def test_appended_storage_a_turn_end_after_the_damage_makes_it_corruption() -> None:
    records = RecordSequence(can_tear=True, gap=_gap)
    records.add([event(0, "turn/start", {"turn": 1})])
    records.bad("the first bad record")
    with pytest.raises(errors.SessionPersistenceCorruptionError, match=r"^the first bad record$"):
        records.add([_end(2)])


def test_a_seq_gap_is_named_and_a_gap_holding_a_turn_end_is_corruption() -> None:
    records = RecordSequence(can_tear=True, gap=_gap)
    records.add([event(0, "turn/start", {"turn": 1})])
    assert not records.add([event(2, "step/start", {})])
    assert records.torn
    records = RecordSequence(can_tear=True, gap=_gap)
    with pytest.raises(errors.SessionPersistenceCorruptionError, match=r"^gap: expected 0, got 3$"):
        records.add([_end(3)])


def test_transactional_storage_never_tears() -> None:
    records = RecordSequence(can_tear=False, gap=_gap)
    records.add([event(0, "turn/start", {"turn": 1})])
    with pytest.raises(errors.SessionPersistenceCorruptionError, match=r"^bad row 1$"):
        records.bad("bad row 1")
    records = RecordSequence(can_tear=False, gap=_gap)
    records.add([event(0, "turn/start", {"turn": 1})])
    records.finish(1, lambda n: f"next {n}")
    with pytest.raises(errors.SessionPersistenceCorruptionError, match=r"^next 2$"):
        records.finish(2, lambda n: f"next {n}")


# -- header -----------------------------------------------------------------------------------


def test_header_and_meta_map_one_way_for_every_backend() -> None:
    meta = {"id": "s", "createdAt": 5, "agentPreset": "coder", "cwd": "/w"}
    header = stored_header(meta)
    assert list(header) == [
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "delegationDepth",
        "agentPreset",
    ]
    assert header["delegationDepth"] == 0
    assert meta_of(header) == {**{k: v for k, v in header.items() if k != "type"}}
    assert (
        meta_of({"type": "session", "version": 0, "id": "s", "createdAt": 1})["delegationDepth"]
        == 0
    )
    assert "delegationDepth" not in meta_of({"type": "session", "version": 1, "id": "s"})
    columns = header_columns(meta)
    assert list(columns) == [
        "version", "id", "createdAt", "cwd", "parentSession", "seedLength", "origin",
        "delegationDepth", "agentPreset",
    ]  # fmt: skip
    assert meta_of_columns(list(columns.values())) == meta_of(header)


# -- liveness ---------------------------------------------------------------------------------


def test_a_zombie_holder_is_gone_and_another_hosts_holder_is_never_judged_by_pid() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert holder_gone(child.pid, HOST)  # exited, not reaped: a zombie holds nothing
        assert not holder_gone(child.pid, HOST + ".elsewhere")
    finally:
        child.wait()
    assert not holder_gone(os.getpid(), HOST)
    assert not holder_gone(None, HOST)


# -- DSH_HOME ---------------------------------------------------------------------------------


def test_dsh_home_is_absolute_or_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    assert dsh_home() == tmp_path
    monkeypatch.setenv("DSH_HOME", "")
    assert dsh_home() == Path.home() / ".dsh"
    monkeypatch.setenv("DSH_HOME", "relative/home")
    with pytest.raises(
        ValueError, match=r"^DSH_HOME must be an absolute path, got 'relative/home'$"
    ):
        dsh_home()
    assert absolute_path("~/x", "root") == os.path.expanduser("~/x")
    with pytest.raises(ValueError, match=r"^root must be an absolute path"):
        absolute_path("x", "root")


def test_every_backend_refuses_a_relative_dsh_home(monkeypatch: pytest.MonkeyPatch) -> None:
    import plugins.session_persistence_jsonl as jsonl
    import plugins.session_persistence_sqlite as sqlite

    monkeypatch.setenv("DSH_HOME", "rel")
    for config in (jsonl.Config(), sqlite.Config()):
        with pytest.raises(ValueError, match=r"^DSH_HOME must be an absolute path"):
            config.backend()


# -- errors -----------------------------------------------------------------------------------


def test_every_outcome_has_a_type_with_a_stable_code_under_one_root() -> None:
    kinds = [
        errors.SessionPersistenceError,
        errors.SessionNotFoundError,
        errors.SessionExistsError,
        errors.SessionLockedError,
        errors.SessionPersistenceCorruptionError,
        errors.SessionFormatUnsupportedError,
        errors.StaleWriterError,
        errors.WriterLockLostError,
    ]
    codes = [kind.code for kind in kinds]
    assert len(set(codes)) == len(codes)
    assert all(issubclass(kind, DshError) for kind in kinds)
    assert errors.SessionNotFoundError.code == "SESSION_NOT_FOUND"
    assert errors.SessionExistsError.code == "SESSION_ALREADY_EXISTS"
    assert str(errors.SessionNotFoundError("x")) == 'session "x" not found'
    exported = {name for name in seam.__all__ if name.endswith("Error")}
    assert exported <= {k.__name__ for k in kinds}


# -- testing ----------------------------------------------------------------------------------


def test_test_support_imports_without_pytest_and_ships_its_fixture_logs() -> None:
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import plugins.session_persistence.testing as t\n"
        "import plugins.session_persistence.testing.memory\n"
        "import plugins.session_persistence.testing.child\n"
        "print(t.FIXTURES)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DSH_FIXTURE_LOGS"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    shipped = Path(done.stdout.strip())
    assert shipped == Path(seam.__file__).parent / "testing" / "original_logs"
    assert "tests" not in shipped.relative_to(Path(seam.__file__).parents[2]).parts
    for name in FIXTURE_NAMES:
        assert (shipped / name).is_file()
    assert FIXTURES.is_dir()
