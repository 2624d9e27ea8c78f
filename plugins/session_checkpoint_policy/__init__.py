"""session-checkpoint-policy: semantic durability barriers for persisted agents.

Zero-config namespace plugin (the seed's plugin). It checkpoints the event-sourced session before
a model adapter receives a request (`llm/stream`), before a top-level tool body may cause an
external side effect (`tools/execute`), and at each `agent/pre-step` boundary. It adds no prompt,
tool schema or session event; `sessionPersistence` is injected only as a presence gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context

    from .metrics import FLUSHED, CheckpointFlushed

__all__ = ["FLUSHED", "CheckpointFlushed", "aliases", "apply", "inject", "name"]

name = "session-checkpoint-policy"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-session-checkpoint-policy"]
inject = ["llm", "sessionPersistence", "sessions", "tools"]


def apply(ctx: Context, config: object) -> None:
    """Install the three barriers; they are removed when the fiber is disposed."""
    # Imported here: resolving the plugin (`dsh sessions`) does not import the model and tool
    # machinery the barriers hook into (docs/performance.md, "Start-up (P11)").
    from .barriers import install

    install(ctx)


#: The module of each public name, imported on first use (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {"FLUSHED": "metrics", "CheckpointFlushed": "metrics"}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
