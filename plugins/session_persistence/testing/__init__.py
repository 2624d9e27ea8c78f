"""Test support for persistence backends, importable without pytest.

- `fakes`: `FakeClock` (drives the batching window) and `FaultInjector` (wraps a backend:
  counts writes, injects failures, holds writes in flight);
- `builders`: event builders (`event`, `complete_turn`, `open_step_turn`, `open_tool_turn`,
  `meta`, `replay`, `texts`);
- `world`: `running(backend)`, a root Context with `sessions` and `sessionPersistence`;
- `fixtures`: the original harness's logs (`FIXTURES`, `FIXTURE_NAMES`, `read_fixture`);
- `memory`: `MemoryBackend`, the in-memory reference backend.

The pytest contract suite is `testing.contract`; the child process it runs is `testing.child`.
"""

from .builders import (
    CWD,
    T0,
    complete_turn,
    event,
    meta,
    open_step_turn,
    open_tool_turn,
    replay,
    texts,
)
from .fakes import FakeClock, FaultInjector
from .fixtures import FIXTURE_NAMES, FIXTURES, read_fixture
from .world import World, running, store

__all__ = [
    "CWD",
    "FIXTURES",
    "FIXTURE_NAMES",
    "T0",
    "FakeClock",
    "FaultInjector",
    "World",
    "complete_turn",
    "event",
    "meta",
    "open_step_turn",
    "open_tool_turn",
    "read_fixture",
    "replay",
    "running",
    "store",
    "texts",
]
