"""The cancellation grace of tool bodies (docs/tools-and-cancellation.md).

When a call's caller aborts while its body runs, the body is told at once through `exec.signal`
and given `grace_ms` to finish; a body still running then is cancelled at its next await point.
`skip()` ends the grace of bodies whose caller has already aborted (a second Ctrl-C).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from framework import AbortSignal


class _Running:
    """One body in flight: its caller's signal, its agent and the scope that can cut it."""

    __slots__ = ("agent", "caller", "scope")

    def __init__(self, caller: AbortSignal, agent: Any, scope: anyio.CancelScope) -> None:
        self.caller = caller
        self.agent = agent
        self.scope = scope


class CancelGrace:
    """Bounds how long an aborted call's body may keep running (`grace_ms`, 0 = none)."""

    def __init__(self, grace_ms: float) -> None:
        self.grace_ms = grace_ms
        self._running: set[_Running] = set()

    @contextmanager
    def watch(self, caller: AbortSignal, agent: Any = None) -> Iterator[anyio.CancelScope]:
        """Run a body inside the returned scope; after `caller` aborts, the scope is cancelled
        once the grace has passed (check `scope.cancelled_caught` afterwards)."""
        scope = anyio.CancelScope()
        running = _Running(caller, agent, scope)

        def on_abort(_reason: object) -> None:
            if self.grace_ms <= 0:
                scope.cancel()
            else:
                scope.deadline = min(scope.deadline, anyio.current_time() + self.grace_ms / 1000)

        remove = caller.add_listener(on_abort)
        self._running.add(running)
        try:
            with scope:
                yield scope
        finally:
            remove()
            self._running.discard(running)

    def skip(self, agent: Any = None) -> int:
        """Cancel now every body in its grace (of `agent` only, if given); returns how many."""
        cut = [
            running
            for running in self._running
            if running.caller.aborted and (agent is None or running.agent is agent)
        ]
        for running in cut:
            running.scope.cancel()
        return len(cut)
