"""The retry executor plugin (`dsh-llm-retry`, docs/retries.md).

Plugin name: `llm-retry`. It listens to `agent/request-error` for every agent and retries a
failed model request of the same step as the route's `RetryPolicy` allows (exponential backoff
with jitter, or the provider's retry-after), recording `llm/retry` and `llm/retry-started`.

Config: `max_wait_ms` (60000): the longest provider retry-after it waits for; a failure asking
for longer ends the turn at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context
    from plugins.llm_retry.config import Config
    from plugins.llm_retry.executor import RetryExecutor, abortable_sleep

__all__ = ["Config", "RetryExecutor", "abortable_sleep", "aliases", "apply", "name"]

name = "llm-retry"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-llm-retry"]


def apply(ctx: Context, config: Config) -> None:
    """Register the executor (a fiber effect: it stops with the plugin)."""
    from plugins.agent.hooks import REQUEST_ERROR
    from plugins.llm_retry.executor import RetryExecutor

    ctx.on(REQUEST_ERROR, RetryExecutor(max_wait_ms=config.max_wait_ms))


#: The module of each public name, imported on first use: resolving the plugin (`dsh sessions`)
#: does not import the agent and model machinery the executor works with, nor build its `Config`
#: model (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {
    "Config": "config",
    "RetryExecutor": "executor",
    "abortable_sleep": "executor",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
