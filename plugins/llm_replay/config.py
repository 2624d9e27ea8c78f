"""`dsh-llm-replay` configuration (docs/configuration.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from plugins.llm_replay.script import ReplayResponse


class Config(BaseModel):
    """Replay adapter configuration."""

    model_config = ConfigDict(extra="forbid")

    provider: str | list[str] = "replay"
    model: str = "replay"
    responses: list[ReplayResponse] | None = None
    file: str | None = None
    context_window: int = Field(default=128000, gt=0)
    chunk_size: int = Field(default=8, gt=0)
    delay_ms: float = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _one_source(self) -> Config:
        if self.responses is not None and self.file is not None:
            raise PydanticCustomError("replay_source", "set either responses or file, not both")
        return self
