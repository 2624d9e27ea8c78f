"""The `mcp/tools` session event: what a server offered, recorded when a turn first uses it.

Written from `tools/pre-execute` once the call is allowed, so it lands after the call's
`tool/call` and before the checkpoint that makes the call durable (no extra flush). A server
that is down is started there, so the record shows the list the call will meet. It is
`ignorable: true`: a harness that does not know the type still loads the log. Data (see
docs/mcp.md):
`{"server", "turn", "serverInfo": {"name", "version"}, "tools": [the tools as MCP listed them]}`.
A server restarted within the turn is recorded again (its list may have changed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from framework import Context
from plugins.tools import Allow, Ask, Deny, ToolExecution, ToolsService

from .connection import Connection
from .tools import McpTool

EVENT_TYPE: Final = "mcp/tools"
#: How far back from the end of the log the call's `tool/call` event is looked for.
_CALL_LOOKBACK: Final = 512


class ToolListRecorder:
    """Remembers, per live session, which server generations its current turn has recorded."""

    def __init__(self, ctx: Context, connections: Iterable[Connection]) -> None:
        self._ctx = ctx
        self._connections = frozenset(connections)
        #: session id -> (turn, {server: generation recorded in that turn})
        self._seen: dict[str, tuple[Any, dict[str, int]]] = {}

    async def pre_execute(
        self, exec: ToolExecution, next: Callable[[], Awaitable[Allow | Deny | Ask]]
    ) -> Allow | Deny | Ask:
        """`tools/pre-execute` listener: once the call is allowed, make sure its server runs
        (a restart lists the tools again) and record the list the call will meet."""
        decision = await next()
        agent = exec.agent
        session = getattr(agent, "session", None)
        if not isinstance(decision, Allow) or session is None:
            return decision
        tool = self._ctx.service(ToolsService).get(exec.name, agent)
        connection = tool.connection if isinstance(tool, McpTool) else None
        if connection in self._connections and await connection.prepare():
            self.record(session, exec.call_id, connection)
        return decision

    def forget(self, session: Any) -> None:
        """`session/disposed` listener."""
        self._seen.pop(str(getattr(session, "id", "")), None)

    def record(self, session: Any, call_id: str, connection: Connection) -> None:
        """Append the `mcp/tools` event unless this turn already has this server's list."""
        listing = connection.listing
        if listing is None:
            return
        turn = _turn_of(session.events, call_id)
        seen_turn, servers = self._seen.get(session.id, (None, {}))
        if seen_turn != turn:
            servers = {}
        if servers.get(connection.name) == connection.generation:
            return
        data: dict[str, Any] = {"server": connection.name, "turn": turn}
        data["serverInfo"] = {"name": listing.server_name, "version": listing.server_version}
        data["tools"] = listing.to_json()
        session.append(EVENT_TYPE, data, ignorable=True)
        servers[connection.name] = connection.generation
        self._seen[session.id] = (turn, servers)


def _turn_of(events: list[dict[str, Any]], call_id: str) -> Any:
    """The turn of the call's `tool/call` event (None for a call made outside the loop)."""
    for event in reversed(events[-_CALL_LOOKBACK:]):
        if event["type"] == "tool/call" and event["data"].get("callId") == call_id:
            return event["data"].get("turn")
    return None
