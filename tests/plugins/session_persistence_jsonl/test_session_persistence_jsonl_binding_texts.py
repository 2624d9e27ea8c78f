"""Exact spec texts of the JSONL backend that other tests pin only by prefix."""

from __future__ import annotations

import errno
import os
import re
import socket
import time
from pathlib import Path

import pytest
from jsonl_helpers import MODES, backend, meta, turn, write
from test_jsonl_faults import FaultyOps

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_rollback_failure_group_message_is_exact(tmp_path: Path, mode: str) -> None:
    ops = FaultyOps()
    b = backend(tmp_path, mode, fileops=ops)
    path = await write(b, meta(), [turn(0)])
    ops.failing.update(write=errno.EIO, ftruncate=errno.EIO)
    with pytest.raises(ExceptionGroup) as caught:
        await b.append_batch(meta(), turn(8, 2), is_materialized=True)
    assert caught.value.message == f'failed to roll back append to "{path}"'
    await b.aclose()


@pytest.mark.parametrize("mode", MODES)
async def test_lock_file_records_the_holder_in_the_exact_format(tmp_path: Path, mode: str) -> None:
    b = backend(tmp_path, mode)
    before = time.time_ns() // 1_000_000
    await b.acquire_writer("s1")
    path = await write(b, meta(), [turn(0)])
    after = time.time_ns() // 1_000_000
    lock = path.parent / "session.lock"
    text = lock.read_text()
    found = re.fullmatch(r'\{"pid":(\d+),"host":"(.*)","acquiredAt":(\d+)\}\n', text)
    assert found is not None, text
    assert int(found[1]) == os.getpid()
    assert found[2] == socket.gethostname()
    assert before <= int(found[3]) <= after
    assert lock.stat().st_mode & 0o777 == 0o600
    await b.aclose()
