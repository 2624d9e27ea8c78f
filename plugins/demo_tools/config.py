"""`dsh-demo-tools` configuration (docs/configuration.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Config(BaseModel):
    """Where the tools work and how much `read_file` returns."""

    model_config = ConfigDict(extra="forbid")

    workspace: str | None = None
    ledger_path: str | None = None
    max_read_bytes: int = Field(default=65536, gt=0)
