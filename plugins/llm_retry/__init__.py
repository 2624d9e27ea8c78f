"""The retry executor plugin (`dsh-llm-retry`, docs/retries.md).

Plugin name: `llm-retry`. It listens to `agent/request-error` for every agent and retries a
failed model request of the same step as the route's `RetryPolicy` allows (exponential backoff
with jitter, or the provider's retry-after), recording `llm/retry` and `llm/retry-started`.

Config: `max_wait_ms` (60000): the longest provider retry-after it waits for; a failure asking
for longer ends the turn at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from framework import Context
    from plugins.llm_retry.executor import RetryExecutor, abortable_sleep

__all__ = ["Config", "RetryExecutor", "abortable_sleep", "aliases", "apply", "name"]

name = "llm-retry"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-llm-retry"]


class Config(BaseModel):
    """Retry executor configuration (the policy itself is the route's)."""

    model_config = ConfigDict(extra="forbid")

    #: The longest provider retry-after (ms) worth waiting for; a failure asking for longer
    #: ends the turn at once.
    max_wait_ms: int = Field(default=60000, ge=0)


def apply(ctx: Context, config: Config) -> None:
    """Register the executor (a fiber effect: it stops with the plugin)."""
    from plugins.agent.hooks import REQUEST_ERROR
    from plugins.llm_retry.executor import RetryExecutor

    ctx.on(REQUEST_ERROR, RetryExecutor(max_wait_ms=config.max_wait_ms))


#: The executor is imported on first use: resolving the plugin (`dsh sessions`) does not import
#: the agent and model machinery it works with (docs/performance.md, "Start-up (P11)").
_LAZY = frozenset({"RetryExecutor", "abortable_sleep"})

if not TYPE_CHECKING:

    def __getattr__(attribute: str) -> Any:
        if attribute not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
        value = getattr(importlib.import_module(".executor", __name__), attribute)
        globals()[attribute] = value
        return value
