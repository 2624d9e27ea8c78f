"""Demo tools (`dsh-demo-tools`): `read_file`, `list_files`, `write_file` confined to
a workspace folder, `append_ledger` / `find_ledger_entry` over an idempotent JSONL ledger, and
the slow `sleep_then_write`.

Config: `workspace` (default: the current directory), `ledger_path` (default
`$DSH_HOME/ledger.jsonl`, `DSH_HOME` defaulting to `~/.dsh`), `max_read_bytes` (65536).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context

    from .config import Config
    from .ledger import Ledger
    from .workspace import NotFoundError, PathOutsideWorkspaceError, Workspace

__all__ = [
    "Config",
    "Ledger",
    "NotFoundError",
    "PathOutsideWorkspaceError",
    "Workspace",
    "aliases",
    "apply",
    "default_ledger_path",
    "inject",
    "name",
]

name = "demo-tools"
#: Other names manifests may use for this plugin (the original npm spellings).
aliases = ["@deepseek-ai/dsh-demo-tools"]
inject = ["tools"]


def default_ledger_path() -> str:
    """`$DSH_HOME/ledger.jsonl` (`DSH_HOME` defaults to `~/.dsh`)."""
    home = os.environ.get("DSH_HOME") or os.path.join(os.path.expanduser("~"), ".dsh")
    return os.path.join(home, "ledger.jsonl")


def apply(ctx: Context, config: Config) -> None:
    """Register the five tools (owned by this plugin)."""
    from plugins.tools import ToolsService

    from .ledger import Ledger
    from .slow import slow_tool
    from .tools import build_tools
    from .workspace import Workspace

    workspace = Workspace(os.path.expanduser(config.workspace or os.getcwd()))
    ledger = Ledger(os.path.expanduser(config.ledger_path or default_ledger_path()))
    for tool in [*build_tools(workspace, ledger, config.max_read_bytes), slow_tool(workspace)]:
        ctx.service(ToolsService).register(tool)


#: The module of each public class. The package imports one on first use: resolving the plugin
#: (`dsh sessions`) does not import the tools machinery or build its `Config` model
#: (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {
    "Config": "config",
    "Ledger": "ledger",
    "NotFoundError": "workspace",
    "PathOutsideWorkspaceError": "workspace",
    "Workspace": "workspace",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
