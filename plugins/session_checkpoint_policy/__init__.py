"""session-checkpoint-policy: semantic durability barriers for persisted agents.

Zero-config namespace plugin (the seed's plugin). It checkpoints the event-sourced session before
a model adapter receives a request (`llm/stream`), before a top-level tool body may cause an
external side effect (`tools/execute`), and at each `agent/pre-step` boundary. It adds no prompt,
tool schema or session event; `sessionPersistence` is injected only as a presence gate.
"""

from __future__ import annotations

from framework import Context

from .barriers import install
from .metrics import FLUSHED, CheckpointFlushed

__all__ = ["FLUSHED", "CheckpointFlushed", "aliases", "apply", "inject", "name"]

name = "session-checkpoint-policy"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-checkpoint-policy"]
inject = ["llm", "sessionPersistence", "sessions", "tools"]


def apply(ctx: Context, config: object) -> None:
    """Install the three barriers; they are removed when the fiber is disposed."""
    install(ctx)
