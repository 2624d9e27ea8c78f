"""session-checkpoint-policy-strict: the base barriers plus bounded-interval stream checkpoints.

A drop-in replacement for the base policy: while a response streams, a chunk
appended at least `stream_checkpoint_ms` before the next chunk is requested is made durable before
that next chunk is delivered. Off by default; `config/overlays/strict-checkpoints.yml` mounts it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from framework import Context

from .barriers import install

name = "session-checkpoint-policy-strict"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-checkpoint-policy-strict"]
inject = ["llm", "sessionPersistence", "sessions", "tools"]


class Config(BaseModel):
    """Interval between streaming checkpoints, in milliseconds."""

    model_config = ConfigDict(extra="forbid")

    stream_checkpoint_ms: int = Field(default=1000, ge=1, le=2**31 - 1)


def apply(ctx: Context, config: Config) -> None:
    """Install the base barriers with interval checkpoints in the request barrier."""
    install(ctx, config.stream_checkpoint_ms)
