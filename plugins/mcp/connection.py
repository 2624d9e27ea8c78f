"""One MCP server: its connection task, its tool list, calls, and restart after it died.

The connection lives in a background task of the plugin's fiber (`ctx.start`): it opens the
transport (a child process over stdio, or streamable HTTP), runs the SDK's `ClientSession`
handshake, lists the tools, reports ready, then waits until the transport ends or the fiber is
disposed. Leaving the task closes the session and the transport; for stdio the SDK closes the
child's stdin, then terminates and reaps its process group. A call that finds the connection
gone starts a new one first (see docs/mcp.md).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import IO, Any, TextIO, cast

import anyio
import httpx2
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolResult,
    Implementation,
    PaginatedRequestParams,
    RequestParamsMeta,
    Tool,
)

from framework import AbortSignal, Context, abort_scope

from .config import HttpServer, StdioServer
from .errors import (
    McpCallError,
    McpResultError,
    McpServerDiedError,
    McpServerUnavailableError,
    McpStartError,
)

log = logging.getLogger(__name__)

#: The `_meta` key that carries the durable call's idempotency key.
IDEMPOTENCY_META_KEY = "dsh/idempotencyKey"
CLIENT_INFO = Implementation(name="dsh-mcp", version="0.1.0")

Message = SessionMessage | Exception


@dataclass(frozen=True)
class Listing:
    """What one start of a server offered: its tools (as listed) and its self-description."""

    tools: tuple[Tool, ...]
    server_name: str | None = None
    server_version: str | None = None

    def to_json(self) -> list[dict[str, Any]]:
        """The tools as MCP lists them (camelCase JSON)."""
        return [
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in self.tools
        ]


@dataclass
class _Live:
    """A running connection: the session and the event set when its transport ended."""

    session: ClientSession
    listing: Listing
    ended: anyio.Event
    #: Bumped per start, so a tool-list record can tell a restarted server's list apart.
    generation: int


class Connection:
    """The client side of one configured server (one per `servers:` entry)."""

    def __init__(self, ctx: Context, name: str, server: StdioServer | HttpServer) -> None:
        self._ctx = ctx
        self.name = name
        self.server = server
        self._live: _Live | None = None
        self._starting = anyio.Lock()
        self._generation = 0
        #: A failed start made by `prepare`, reported by the next call instead of a second try.
        self._failed: McpStartError | None = None

    @property
    def listing(self) -> Listing | None:
        """The tool list of the current (or last) start."""
        return None if self._live is None else self._live.listing

    @property
    def generation(self) -> int:
        """How many times the server has been started."""
        return self._generation

    @property
    def up(self) -> bool:
        """True while the connection task holds a session whose transport has not ended."""
        return self._live is not None and not self._live.ended.is_set()

    async def start(self) -> Listing:
        """Start the server (or keep the running one) and return its tool list.

        Raises `McpStartError` if the command fails, the process exits or the handshake does
        not finish within `start_timeout_ms`.
        """
        async with self._starting:
            if self._live is not None and not self._live.ended.is_set():
                return self._live.listing
            try:
                self._live = await self._ctx.start(self._serve, name=f"mcp server {self.name}")
            except Exception as error:
                raise McpStartError(self.name, _reason(error)) from None
            return self._live.listing

    async def prepare(self) -> bool:
        """Start the server if it is down, ahead of a call; True if it is up.

        A failure is kept for the next `call`, which reports it rather than starting again.
        """
        try:
            await self.start()
        except McpStartError as error:
            self._failed = error
            return False
        return True

    async def call(
        self, tool: str, arguments: dict[str, Any], key: str, signal: AbortSignal
    ) -> CallToolResult:
        """Call `tool` with the idempotency key in `_meta`; abortable through `signal`.

        Raises `McpServerUnavailableError` (not started: no effect), `McpServerDiedError` (the
        connection ended mid-call: outcome unknown), `McpCallError` (an MCP error response) or
        `McpResultError` (an answer the SDK refuses).
        """
        with abort_scope(signal):
            failed, self._failed = self._failed, None
            try:
                if failed is not None and not self.up:
                    raise failed
                await self.start()
            except McpStartError as error:
                raise McpServerUnavailableError(self.name, error.reason) from None
            live = self._live
            assert live is not None
            try:
                meta = cast(RequestParamsMeta, {IDEMPOTENCY_META_KEY: key})
                return await live.session.call_tool(tool, arguments, meta=meta)
            except MCPError as error:
                if error.code != CONNECTION_CLOSED:
                    raise McpCallError(self.name, tool, error.error.message, error.code) from None
                live.ended.set()  # restart on the next call even if the transport lingers
                raise McpServerDiedError(self.name, tool) from None
            except (RuntimeError, ValueError) as error:
                # The SDK checks the answer after it arrived (output schema, result kind).
                raise McpResultError(self.name, tool, str(error) or type(error).__name__) from None
        raise AssertionError("unreachable")  # pragma: no cover - abort_scope raises on abort

    async def _serve(self, *, task_status: TaskStatus[_Live]) -> None:
        """The connection task: open, hand the live session over, hold it until it ends."""
        started = False
        try:
            with tempfile.TemporaryFile() as errlog:
                try:
                    async with self._session(errlog) as live:
                        task_status.started(live)
                        started = True
                        await live.ended.wait()
                except Exception as error:
                    if not started:
                        raise McpStartError(self.name, _with_stderr(error, errlog)) from None
                    raise
        except Exception as error:
            if not started:
                raise
            log.warning('MCP server "%s" connection failed: %s', self.name, _reason(error))
        finally:
            if started:
                log.debug('MCP server "%s" connection closed', self.name)

    @asynccontextmanager
    async def _session(self, errlog: IO[bytes]) -> AsyncIterator[_Live]:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._transport(errlog))
            ended = anyio.Event()
            relay_send, relay_receive = anyio.create_memory_object_stream[Message](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            group.start_soon(_relay, read, relay_send, ended)
            session = await stack.enter_async_context(
                ClientSession(relay_receive, write, client_info=CLIENT_INFO)
            )
            with anyio.fail_after(self.server.start_timeout_ms / 1000):
                init = await session.initialize()
                tools = await _list_tools(session)
            info = init.server_info
            self._generation += 1
            yield _Live(
                session,
                Listing(tools, info.name, info.version),
                ended,
                self._generation,
            )
            group.cancel_scope.cancel()

    def _transport(self, errlog: IO[bytes]) -> Any:
        server = self.server
        if isinstance(server, StdioServer):
            params = StdioServerParameters(
                command=server.executable, args=server.args, env=server.env, cwd=server.cwd
            )
            # The child writes to the file's descriptor; the SDK only passes it on.
            return stdio_client(params, errlog=cast(TextIO, errlog))
        return _http(server)


@asynccontextmanager
async def _http(server: HttpServer) -> AsyncIterator[Any]:
    # The SDK's own defaults: 30 s to connect or write, 300 s between reads of a stream.
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=dict(server.headers), timeout=timeout) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams


async def _relay(source: Any, sink: MemoryObjectSendStream[Message], ended: anyio.Event) -> None:
    """Forward the transport's messages to the session; set `ended` when the transport ends."""
    try:
        async with sink:
            async for item in source:
                await sink.send(item)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        ended.set()


async def _list_tools(session: ClientSession) -> tuple[Tool, ...]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tuple(tools)


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _reason(error: BaseException) -> str:
    """A one-line reason for a failed start (the SDK's errors arrive in exception groups)."""
    error = _leaf(error)
    if isinstance(error, McpStartError):
        return error.reason
    if isinstance(error, TimeoutError):
        return "the handshake timed out"
    if isinstance(error, MCPError):
        if error.code == CONNECTION_CLOSED:
            return "the server closed the connection during the handshake"
        return f"{error.error.message} (MCP error {error.code})"
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or error}"
    if isinstance(error, OSError):
        return f"{type(error).__name__}: {error.strerror or error}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _with_stderr(error: BaseException, errlog: IO[bytes]) -> str:
    """The start failure's reason, with the last line the server wrote to stderr (if any)."""
    reason = _reason(error)
    try:
        size = errlog.seek(0, os.SEEK_END)
        errlog.seek(max(0, size - 4096))
        tail = errlog.read().decode("utf-8", errors="replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
    except (OSError, ValueError):
        lines = []
    if lines:
        reason = f"{reason}; its stderr ends with: {lines[-1]}"
    return reason
