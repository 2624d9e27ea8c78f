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

from pathlib import Path
from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context
    from plugins.llm_replay.adapter import ReplayAdapter
    from plugins.llm_replay.config import Config
    from plugins.llm_replay.script import ReplayFailure, ReplayResponse, ReplayToolCall, load_script

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


def apply(ctx: Context, config: Config) -> None:
    """Load the script and route the configured providers to a new replay adapter."""
    from plugins.llm_replay.adapter import ReplayAdapter
    from plugins.llm_replay.script import load_script

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


#: The module of each public name, imported on first use: resolving the plugin (`dsh sessions`)
#: does not import the adapter (and `plugins.llm` under it) or build the config and script
#: models (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {
    "ReplayAdapter": "adapter",
    "Config": "config",
    "ReplayFailure": "script",
    "ReplayResponse": "script",
    "ReplayToolCall": "script",
    "load_script": "script",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
