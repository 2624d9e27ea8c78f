"""A test plugin that breaks the JSONL backend's disk from a chosen event on.

Mounted by an overlay row (`name: ./broken_disk.py`, config `{after, call, errno}`): once the live
session appends an event of type `after`, every `FileOps.<call>` of the process fails with
`OSError(errno)` — a full disk (`ENOSPC` on `write`), a failing device (`EIO` on `fsync`) or a
file system remounted read-only (`EROFS` on `write`).
"""

from __future__ import annotations

import errno
import os
from typing import Any

from pydantic import BaseModel

from plugins.session_persistence_jsonl.fileops import FileOps

name = "broken-disk"


class Config(BaseModel):
    after: str = "turn/end"
    call: str = "write"
    errno: str = "ENOSPC"


def apply(ctx: Any, config: Config) -> None:
    code = getattr(errno, config.errno)
    original = getattr(FileOps, config.call)
    broken = {"now": False}

    def failing(self: FileOps, *args: Any) -> Any:
        if broken["now"]:
            raise OSError(code, os.strerror(code))
        return original(self, *args)

    def on_event(_session: Any, event: Any) -> None:
        if event["type"] == config.after:
            broken["now"] = True

    setattr(FileOps, config.call, failing)
    ctx.on("session/event", on_event)
