"""Errors of `dsh-mcp`: what a failed MCP call tells the model (see docs/mcp.md).

Raised inside a tool body, each becomes an ordinary failed tool result (`Error: <message>`,
`error.info = {name, code}`); `McpStartError` and `McpToolListError` fail the row at mount time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from plugins.llm import HarnessError

#: Result codes (`error.info.code`) of MCP tool calls.
MCP_SERVER_UNAVAILABLE = "MCP_SERVER_UNAVAILABLE"
MCP_SERVER_DIED = "MCP_SERVER_DIED"
MCP_ERROR = "MCP_ERROR"
MCP_TOOL_ERROR = "MCP_TOOL_ERROR"
MCP_START_FAILED = "MCP_START_FAILED"
MCP_UNKNOWN_TOOL = "MCP_UNKNOWN_TOOL"
MCP_INVALID_RESULT = "MCP_INVALID_RESULT"


class McpStartError(HarnessError):
    """A server did not start: the command failed, exited early or the handshake timed out."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f'MCP server "{server}" did not start: {reason}', MCP_START_FAILED)
        self.server = server
        self.reason = reason


class McpServerUnavailableError(HarnessError):
    """A call found its server down and could not restart it; the call was never sent."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(
            f'MCP server "{server}" is not available ({reason}); the call was not sent, so it '
            "had no effect. The server is started again on the next call.",
            MCP_SERVER_UNAVAILABLE,
        )


class McpServerDiedError(HarnessError):
    """The connection to the server ended while the call was in flight: its outcome is unknown."""

    def __init__(self, server: str, tool: str) -> None:
        super().__init__(
            f'MCP server "{server}" stopped while "{tool}" was running, so its outcome is '
            "unknown: the effect may have happened. Verify the external state before retrying; "
            "the server is started again on the next call.",
            MCP_SERVER_DIED,
        )


class McpCallError(HarnessError):
    """The server answered the call with an MCP (JSON-RPC) error response."""

    def __init__(self, server: str, tool: str, message: str, code: int) -> None:
        super().__init__(
            f'MCP server "{server}" rejected the call to "{tool}": {message} (MCP error {code})',
            MCP_ERROR,
        )
        self.mcp_code = code


class McpResultError(HarnessError):
    """The server answered, but with a result the client refuses (e.g. one that breaks the
    tool's own output schema): the call ran, so its effect may have happened."""

    def __init__(self, server: str, tool: str, problem: str) -> None:
        super().__init__(
            f'MCP server "{server}" answered the call to "{tool}" with a result that cannot be '
            f"used ({problem}); the call ran, so its effect may have happened.",
            MCP_INVALID_RESULT,
        )


class McpToolError(HarnessError):
    """The tool ran and reported a failure (`isError`); the message is the tool's own text."""

    def __init__(self, text: str) -> None:
        super().__init__(text, MCP_TOOL_ERROR)


class McpToolListError(HarnessError):
    """A config names a tool (in `tools:` or `read_only:`) that the server does not offer."""

    def __init__(
        self, server: str, field: str, missing: Sequence[str], offered: Iterable[str]
    ) -> None:
        names = ", ".join(f'"{name}"' for name in missing)
        super().__init__(
            f'MCP server "{server}" offers no tool {names} (named in {field}:); it offers: '
            + (", ".join(sorted(offered)) or "no tools"),
            MCP_UNKNOWN_TOOL,
        )
