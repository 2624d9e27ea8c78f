"""`dsh-tools` configuration (docs/configuration.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .service import DEFAULT_GRACE_MS


class Config(BaseModel):
    """`dsh-tools` configuration."""

    model_config = ConfigDict(extra="forbid")

    #: Once a call's caller aborts, how long its body may keep running before it is cancelled
    #: at its next await point, in ms (0: at once).
    cancel_grace_ms: float = Field(default=DEFAULT_GRACE_MS, ge=0, allow_inf_nan=False)
