"""The scripted replay adapter plugin (`dsh-llm-replay`, docs/models.md): no network, no key.

Plugin name: `llm-replay`. Config: `provider` (str or list, default `"replay"`), `model`
(`"replay"`; informational, any model is served), `responses` (a list of items) or `file` (a
YAML/JSON file holding that list; `.json` is read as JSON), `context_window` (128000),
`chunk_size` (8), `delay_ms` (0).

`file`: a relative path is resolved against the folder of the manifest (or overlay) the row
came from (`ctx.base_dir`); mounted from code, against the current directory. The file is read
when the plugin activates.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from plugins.llm_replay.script import ReplayFailure, ReplayResponse, ReplayToolCall, load_script

if TYPE_CHECKING:
    from framework import Context
    from plugins.llm_replay.adapter import ReplayAdapter

__all__ = [
    "Config",
    "ReplayAdapter",
    "ReplayFailure",
    "ReplayResponse",
    "ReplayToolCall",
    "aliases",
    "apply",
    "inject",
    "load_script",
    "name",
]

name = "llm-replay"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-llm-replay"]
inject = ["llm"]


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


def apply(ctx: Context, config: Config) -> None:
    """Load the script and route the configured providers to a new replay adapter."""
    from plugins.llm_replay.adapter import ReplayAdapter

    if config.file is not None:
        path = Path(config.file).expanduser()
        if ctx.base_dir is not None:
            path = ctx.base_dir / path  # an absolute `path` stays as it is
        responses = load_script(path)
    else:
        responses = config.responses or []
    adapter = ReplayAdapter(
        responses,
        context_window=config.context_window,
        chunk_size=config.chunk_size,
        delay_ms=config.delay_ms,
    )
    ctx.llm.register_adapter(config.provider, adapter)


if not TYPE_CHECKING:

    def __getattr__(attribute: str) -> Any:
        # The adapter (and `plugins.llm` under it) is imported on first use: resolving the
        # plugin (`dsh sessions`) does not import it (docs/performance.md, "Start-up (P11)").
        if attribute != "ReplayAdapter":
            raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
        value = importlib.import_module(".adapter", __name__).ReplayAdapter
        globals()[attribute] = value
        return value
