"""Whether another task of the running event loop may be ready to run (docs/performance.md).

A drain yields one loop pass before it cuts its batch so that flushers already scheduled can
append their events and join its write. When no other task is ready that pass would only come
back to the drain, at the cost of a loop iteration (an `epoll_wait` and the scheduler's
bookkeeping), so the drain asks `others_runnable()` first.

Only asyncio can tell, and only through its private ready queue (`loop._ready`, which holds
every callback due in the current iteration until it runs). Trio takes its whole run queue into
a local batch at each iteration, so the tasks about to run in the current one are visible
nowhere; there, and on any loop without `_ready`, the answer is True: the drain yields as it
always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized

__all__ = ["others_runnable"]


def others_runnable() -> bool:
    """False only when the running loop's ready queue is known to be empty."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop: anyio runs on trio
        return True
    ready: Sized | None = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0
