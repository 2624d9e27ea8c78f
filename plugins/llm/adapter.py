"""The adapter Protocol a provider implementation satisfies (docs/models.md).

Only `stream` is required. An adapter may also define (looked up with `getattr`):

- `provider_info(provider) -> ProviderInfo` — display metadata; must keep `id == provider` and a
  non-empty `name` (default `{"id": provider, "name": provider}`);
- `provider_retry_policy(provider) -> RetryPolicy | None` — the route's policy (default
  `RetryPolicy()`);
- `async resolve_model(provider, model, signal) -> ModelInfo` — model metadata and defaults;
- `ends_at_finish = True` — resumed after its finish chunk, its stream returns at once without
  awaiting anything, so the service finishes it instead of closing it (docs/models.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, Protocol

from plugins.llm.types import GenerateOptions, StreamChunk

#: The attribute an adapter sets to True when its stream returns right after its finish chunk.
ENDS_AT_FINISH: Final = "ends_at_finish"


class LlmAdapter(Protocol):
    """A model provider: streams chunks for one request and honours `options.signal`."""

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Start one request; usually an async generator function."""
        ...
