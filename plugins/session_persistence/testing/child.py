"""The child process of the contract's cross-process behaviour: it owns a live session.

`python -m plugins.session_persistence.testing.child hold '<json spec>'` builds the backend
`spec["factory"]` (`"module:callable"`) names with `spec["kwargs"]`, binds a live session
`spec["session"]` at `spec["cwd"]` with `spec["events"]` flushed, prints `ready` and waits to be
killed.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import anyio

from ..backend import JsonObject, PersistenceBackend
from . import replay, running


def _build(factory: str, kwargs: dict[str, Any]) -> PersistenceBackend:
    module, _, attribute = factory.partition(":")
    backend: PersistenceBackend = getattr(importlib.import_module(module), attribute)(**kwargs)
    return backend


async def _hold(spec: JsonObject) -> None:
    """Own a live session with `spec["events"]` flushed, report `ready`, then wait to be killed."""
    backend = _build(spec["factory"], spec["kwargs"])
    async with running(backend) as w:
        session = w.sessions.create(spec["session"], meta={"cwd": spec["cwd"], "createdAt": 1})
        replay(session, spec["events"])
        await w.sessions.flush(session)
        print("ready", flush=True)
        await anyio.sleep_forever()


def main(argv: list[str]) -> int:
    """`python -m plugins.session_persistence.testing.child hold '<json spec>'`."""
    if len(argv) != 2 or argv[0] != "hold":
        print("usage: python -m plugins.session_persistence.testing.child hold '<json spec>'")
        return 2
    anyio.run(_hold, json.loads(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
