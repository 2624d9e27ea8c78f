"""The OpenAI-compatible adapter plugin (`dsh-llm-openai`, docs/models.md).

Plugin name: `llm-openai`. Config: `provider` (`"openai"`, str or list), `base_url`
(`https://api.openai.com/v1`), `api_key_env` (`OPENAI_API_KEY`; null → no `Authorization`),
`model` (sent when a request names no model), `timeout_s` (60; connect and per read),
`max_tokens` / `context_window` (model defaults reported to the llm service), `headers`,
`idempotency_header` (null: none sent; else `options.idempotency_key` goes in that header),
`retry_policy` (fields of `plugins.llm.RetryPolicy`), `echo_reasoning` (false; true sends earlier
reasoning back as `reasoning_content`, which DeepSeek's thinking mode requires).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from pydantic import BaseModel, ConfigDict, Field

from plugins.llm import RetryPolicy
from plugins.llm_openai.adapter import OpenAIAdapter
from plugins.llm_openai.secrets import LogScrubber

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from framework import Context

__all__ = ["Config", "OpenAIAdapter", "aliases", "apply", "inject", "name"]

name = "llm-openai"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-llm-openai"]
inject = ["llm"]


class Config(BaseModel):
    """OpenAI-compatible adapter configuration (never the key itself: only its variable)."""

    model_config = ConfigDict(extra="forbid")

    #: The provider name(s) routed to this adapter.
    provider: str | list[str] = "openai"
    #: The API root; requests go to `<base_url>/chat/completions`.
    base_url: str = "https://api.openai.com/v1"
    #: The environment variable holding the key, read and validated at each request (null: no
    #: `Authorization` header).
    api_key_env: str | None = "OPENAI_API_KEY"
    #: The model sent when a request names none.
    model: str | None = None
    #: Seconds allowed for the connection and for each read.
    timeout_s: float = Field(default=60, gt=0)
    #: The default `max_tokens` reported to the llm service.
    max_tokens: int | None = Field(default=None, gt=0)
    #: The context window reported to the llm service.
    context_window: int | None = Field(default=None, gt=0)
    #: Extra request headers.
    headers: dict[str, str] = Field(default_factory=dict)
    #: The header carrying the request's idempotency key (null: none sent).
    idempotency_header: str | None = None
    #: The route's retry policy (fields of `RetryPolicy`), applied by `dsh-llm-retry`; null: the
    #: defaults (5 retries, 500 ms doubling to 10 s, jitter 0.1).
    retry_policy: RetryPolicy | None = None
    #: Send earlier reasoning back as `reasoning_content` (DeepSeek's thinking mode needs it).
    echo_reasoning: bool = False


async def apply(ctx: Context, config: Config) -> Callable[[], Awaitable[None]]:
    """Open the HTTP client and route the configured providers to a new adapter."""
    client = httpx.AsyncClient()
    adapter = OpenAIAdapter(
        client,
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        model=config.model,
        timeout_s=config.timeout_s,
        max_tokens=config.max_tokens,
        context_window=config.context_window,
        headers=config.headers,
        idempotency_header=config.idempotency_header,
        retry_policy=config.retry_policy,
        echo_reasoning=config.echo_reasoning,
    )
    try:
        ctx.llm.register_adapter(config.provider, adapter)
    except BaseException:
        await client.aclose()
        raise
    scrubber = None if config.api_key_env is None else LogScrubber(config.api_key_env)
    detach = None if scrubber is None else scrubber.install()

    async def close() -> None:
        if detach is not None:
            detach()
        await client.aclose()

    return close
