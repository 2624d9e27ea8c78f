"""The adapter Protocol a provider implementation satisfies (docs/models.md).

Only `stream` is required. An adapter may also define (looked up with `getattr`):

- `provider_info(provider) -> ProviderInfo` — display metadata; must keep `id == provider` and a
  non-empty `name` (default `{"id": provider, "name": provider}`);
- `provider_retry_policy(provider) -> RetryPolicy | None` — the route's policy (default
  `RetryPolicy()`);
- `async resolve_model(provider, model, signal) -> ModelInfo` — model metadata and defaults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from plugins.llm.types import GenerateOptions, StreamChunk


class LlmAdapter(Protocol):
    """A model provider: streams chunks for one request and honours `options.signal`."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Start one request; usually an async generator function."""
        ...
