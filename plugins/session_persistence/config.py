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


class InlineWrites(BaseModel):
    """The inline-write field of the backends whose writes run on an I/O thread (JSONL, SQLite;
    docs/performance.md): mix it into their `Config`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    #: Run a live session's checkpoint write on the event loop's thread, skipping the I/O
    #: thread's hand-off, while it is the backend's only live session, nothing else is queued and
    #: at most one of the last 16 such writes took more than this many ms (a second one, or one
    #: over ten times it: back to the thread until the slow ones are 16 writes old). 0 (the
    #: default) never does; the `dsh` CLI's app sets 2.
    inline_write_max_ms: float = Field(default=0.0, ge=0, le=1000, alias="inlineWriteMaxMs")
