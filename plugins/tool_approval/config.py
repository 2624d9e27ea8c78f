"""`dsh-tool-approval` configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .rules import Rule


class Config(BaseModel):
    """`rules`, the sessions' default `policy`, `timeout_ms` and `unattended`."""

    model_config = ConfigDict(extra="forbid")

    #: Checked in order, the first match wins; a call no rule matches is allowed when its tool
    #: is read-only and asked about otherwise.
    rules: list[Rule] = Field(default_factory=list)
    #: `ask`, or `never` to refuse every call that needs approval without asking; a session's
    #: last `approval/policy` event overrides it.
    policy: Literal["ask", "never"] = "ask"
    #: How long an answerer may take, in ms (none: as long as the person needs); then the call
    #: is refused as `unavailable`.
    timeout_ms: float | None = Field(default=None, gt=0)
    #: What `dsh` does with a question when nobody is at a terminal (a pipe, `--json`): `block`
    #: ends the turn blocked until `dsh approve` / `dsh deny`, `refuse` refuses the call,
    #: `allow` lets it run.
    unattended: Literal["block", "refuse", "allow"] = "block"
