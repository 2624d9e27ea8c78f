"""`dsh-llm-retry` configuration (docs/configuration.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Config(BaseModel):
    """Retry executor configuration (the policy itself is the route's)."""

    model_config = ConfigDict(extra="forbid")

    #: The longest provider retry-after (ms) worth waiting for; a failure asking for longer
    #: ends the turn at once.
    max_wait_ms: int = Field(default=60000, ge=0)
