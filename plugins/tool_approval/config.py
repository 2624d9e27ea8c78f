"""`dsh-tool-approval` configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .rules import Rule


class Config(BaseModel):
    """Rules (first match wins; unmatched tools: read-only → allow, else ask), the sessions'
    default `policy` (`ask`, or `never` to refuse without asking), `timeout_ms` for an answer
    (none: wait as long as the person takes), and what a front end with nobody at hand does
    with a question (`unattended`): `block` ends the turn blocked until `dsh approve`/`dsh deny`,
    `refuse` answers `unavailable`, `allow` lets the call run."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule] = Field(default_factory=list)
    policy: Literal["ask", "never"] = "ask"
    timeout_ms: float | None = Field(default=None, gt=0)
    unattended: Literal["block", "refuse", "allow"] = "block"
