"""`dsh-session-persistence-jsonl`: session logs as JSONL files, raw or zstd (docs/persistence.md).

Provides `sessionPersistence` backed by `JsonlBackend`: one append-only log per session under
`<root>/<project>/<segment(id)>/session.jsonl[.zstd]`, a cross-process writer lock per session,
and packed chunk rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import Field, field_validator

from framework import Context
from plugins.session_persistence import Config as PersistenceConfig
from plugins.session_persistence import mount_persistence
from plugins.session_persistence.config import InlineWrites
from plugins.session_persistence.home import absolute_path

from .backend import Compression, JsonlBackend
from .fileops import FileOps
from .layout import default_root, project_dir, segment

__all__ = [
    "Compression",
    "Config",
    "FileOps",
    "JsonlBackend",
    "aliases",
    "apply",
    "default_root",
    "inject",
    "name",
    "project_dir",
    "segment",
]

name = JsonlBackend.name
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-persistence-jsonl"]
inject = ["sessions"]


class Config(PersistenceConfig, InlineWrites):
    """`root` (default `$DSH_HOME/sessions`), `compression`, `pack_chunks` and
    `inline_write_max_ms`, plus the common persistence fields."""

    #: Directory holding every project's sessions; absolute. Unset: `$DSH_HOME/sessions`.
    root: str | None = None
    #: `"zstd"`: one checksummed frame per durable batch; `"none"`: plain JSONL.
    compression: Literal["zstd", "none"] = "zstd"
    #: Store runs of streaming deltas as packed chunk rows.
    pack_chunks: bool = Field(default=True, alias="packChunks")

    @field_validator("root")
    @classmethod
    def _absolute_root(cls, root: str | None) -> str | None:
        if root is None:
            return None
        return absolute_path(root, "root")

    def backend(self) -> JsonlBackend:
        """A backend for this configuration."""
        return JsonlBackend(
            self.root if self.root is not None else default_root(),
            compression=self.compression,
            pack_chunks=self.pack_chunks,
            inline_write_max_ms=self.inline_write_max_ms,
        )


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Provide `sessionPersistence` over a `JsonlBackend`; the disposer drains and unlocks."""
    return await mount_persistence(ctx, config.backend(), config)
