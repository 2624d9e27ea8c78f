"""The `checkpoint/flushed` bus event and the policy's DEBUG line (docs/checkpoint-policy.md)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from framework import Emit
from plugins.session import SessionStore

if TYPE_CHECKING:
    from framework import Context
    from plugins.session import Session

logger = logging.getLogger("dsh.session_checkpoint_policy")

Barrier = Literal["llm/stream", "tools/execute", "agent/pre-step", "llm/stream:interval"]


@dataclass(frozen=True, slots=True)
class CheckpointFlushed:
    """One checkpoint's outcome: which barrier, which session (and call), how long it took."""

    session_id: str
    barrier: Barrier
    call_id: str | None
    ok: bool
    duration_ms: float
    error: str | None


FLUSHED: Emit[CheckpointFlushed] = Emit("checkpoint/flushed")
"""`(outcome)` after every checkpoint the policy takes (observers, benchmarks)."""


async def checkpoint(
    ctx: Context, session: Session, barrier: Barrier, call_id: str | None = None
) -> None:
    """Flush `session` through the store, then publish the outcome; failures re-raise."""
    start = time.perf_counter()
    try:
        await ctx.service(SessionStore).flush(session)
    except BaseException as exc:
        _publish(ctx, session.id, barrier, call_id, start, str(exc) or type(exc).__name__)
        raise
    _publish(ctx, session.id, barrier, call_id, start, None)


def _publish(
    ctx: Context,
    session_id: str,
    barrier: Barrier,
    call_id: str | None,
    start: float,
    error: str | None,
) -> None:
    duration_ms = (time.perf_counter() - start) * 1000.0
    ok = error is None
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "checkpoint barrier=%s session=%s call=%s ok=%s ms=%.3f",
            barrier,
            session_id,
            call_id or "-",
            ok,
            duration_ms,
        )
    ctx.emit(
        FLUSHED,
        CheckpointFlushed(session_id, barrier, call_id, ok, duration_ms, error),
    )
