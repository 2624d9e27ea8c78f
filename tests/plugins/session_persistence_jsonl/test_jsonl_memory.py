"""P12: loading a log with a huge torn tail stays within twice the log's size in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import json, sys, tracemalloc, anyio
from pathlib import Path
from plugins.session_persistence_jsonl import JsonlBackend

async def main() -> None:
    root, shape, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    b = JsonlBackend(root, compression="none")
    meta = {"version": 0, "id": "s1", "createdAt": 1}
    event = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}
    await b.append_batch(meta, [event], is_materialized=False)
    path = Path(b.locate(meta).path)
    with open(path, "ab") as file:
        if shape == "lines":  # many unparsable lines, no turn/end after them
            line = b'{"type":"x' + b"y" * 1000 + b"\\n"
            file.write(line * (size // len(line)))
        else:  # one line cut before its newline
            file.write(b'{"type":"' + b"y" * size)
    stored_size = path.stat().st_size
    tracemalloc.start()
    stored = await JsonlBackend(root, compression="none").load_stored("s1")
    peak = tracemalloc.get_traced_memory()[1]
    assert stored is not None and stored.torn_marker is not None and len(stored.events) == 1
    print(json.dumps({"size": stored_size, "peak": peak}))

anyio.run(main)
"""


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["lines", "line"])
def test_a_40mb_torn_tail_loads_within_twice_its_size(tmp_path: Path, shape: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "sessions"), shape, str(40 << 20)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["peak"] <= 2 * measured["size"], measured
