"""The `dsh-mcp` row config: `servers: {name: {command, args?, env?, cwd?} | {url, headers?}}`.

Per server, optionally: `tools` (an allow-list of the server's tool names), `timeout_ms` (each
call's deadline, enforced by the timeout policy), `read_only` (tool names declared free of side
effects) and `start_timeout_ms` (start-up and handshake). A stdio command is checked when the
config validates, so a missing command is a `dsh check` problem (see docs/mcp.md).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StringConstraints,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

#: Server names become part of tool names (`mcp__<server>__<tool>`).
ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]


class ServerBase(BaseModel):
    """What every server row may set besides its transport."""

    model_config = ConfigDict(extra="forbid")

    #: Only these tools of the server are registered (null: all it offers).
    tools: list[str] | None = None
    #: The deadline of each call, enforced by dsh-tool-timeout-policy (null: none).
    timeout_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: Tools this deployment declares free of side effects (the readOnlyHint counts too).
    read_only: list[str] = []
    #: How long start-up and the MCP handshake may take.
    start_timeout_ms: float = Field(default=30000, gt=0, allow_inf_nan=False)


class StdioServer(ServerBase):
    """A server run as a child process speaking MCP on its stdin/stdout."""

    #: The executable: a path, or a name looked up on PATH, then beside the running Python.
    command: str = Field(min_length=1)
    #: Its arguments.
    args: list[str] = []
    #: Variables added to a minimal inherited environment (HOME, PATH, USER, ...).
    env: dict[str, str] = {}
    #: Its working directory (null: dsh's own).
    cwd: str | None = None
    _executable: str = PrivateAttr(default="")

    @field_validator("cwd")
    @classmethod
    def _expand_cwd(cls, cwd: str | None) -> str | None:
        return None if cwd is None else os.path.expanduser(cwd)

    @property
    def executable(self) -> str:
        """The command resolved when the config validated."""
        return self._executable

    @model_validator(mode="after")
    def _find_command(self) -> StdioServer:
        found = find_command(self.command, self.cwd, self.env.get("PATH"))
        if found is None:
            raise PydanticCustomError(
                "mcp_command",
                'MCP server command "{command}" was not found '
                "(looked on PATH and beside the running Python)"
                if os.sep not in self.command
                else 'MCP server command "{command}" is not an executable file',
                {"command": self.command},
            )
        self._executable = found
        return self


class HttpServer(ServerBase):
    """A server reached over MCP's streamable HTTP transport."""

    #: The server's MCP endpoint (http:// or https://).
    url: str
    #: Headers sent with every request (e.g. Authorization); never logged.
    headers: dict[str, str] = Field(default={}, repr=False)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise PydanticCustomError("mcp_url", "url must start with http:// or https://")
        return url


def _transport(value: Any) -> str | None:
    if isinstance(value, dict):
        if "command" in value:
            return "stdio"
        if "url" in value:
            return "http"
        return None
    return "stdio" if isinstance(value, StdioServer) else "http"


Server = Annotated[
    Annotated[StdioServer, Tag("stdio")] | Annotated[HttpServer, Tag("http")],
    Discriminator(
        _transport,
        custom_error_type="mcp_server",
        custom_error_message="a server needs either command (stdio) or url (streamable HTTP)",
    ),
]


class Config(BaseModel):
    """The row config of `dsh-mcp`."""

    model_config = ConfigDict(extra="forbid")

    #: The servers by name (letters, digits, `_`, `-`); each a stdio command or an HTTP url.
    servers: dict[ServerName, Server] = {}


def find_command(command: str, cwd: str | None, path: str | None) -> str | None:
    """The executable a stdio server runs, or None.

    A command with a `/` is a file path (relative to `cwd`, else the current directory); a bare
    name is looked up on `path` (default `$PATH`), then beside the running interpreter, so a
    server installed in dsh's own virtualenv is found even when that env is not activated.
    """
    if os.sep in command:
        candidate = Path(cwd or os.getcwd(), os.path.expanduser(command))
        return str(candidate) if _runnable(candidate) else None
    found = shutil.which(command, path=path)
    if found is not None:
        return found
    beside = Path(sys.executable).parent / command
    return str(beside) if _runnable(beside) else None


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)
