"""Configuration shared by every persistence backend plugin (docs/persistence.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_DELAY_MS = 2**31 - 1


class Config(BaseModel):
    """Base of each backend plugin's `Config`: subclass it and add the backend's own fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    #: How long a live session's first buffered event may wait before a background write.
    write_batch_max_delay_ms: int = Field(
        default=200, ge=1, le=MAX_DELAY_MS, alias="writeBatchMaxDelayMs"
    )
    #: How many sessions prepared by `inspect` are kept for a following `prepare`.
    prepared_session_cache_size: int = Field(default=5, ge=0, alias="preparedSessionCacheSize")
