"""A TCP proxy on 127.0.0.1 in front of the test server that loses one reply on purpose.

`lose_reply(marker)`: the next client message carrying `marker` reaches the server, which runs
it to its end (an autocommit statement commits before its `ReadyForQuery`); the proxy swallows
the whole answer and then cuts both sides, so the client's connection breaks with the outcome
unknown to it. `drop_request(marker)`: the message carrying `marker` is cut before the server
sees it. `done` is set once the armed fault happened.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from psycopg.conninfo import conninfo_to_dict, make_conninfo

#: A `ReadyForQuery` message without its status byte: type `Z`, length 5.
_READY = b"Z\x00\x00\x00\x05"


class ReplyProxy:
    """Forwards every connection to `dsn`'s server; `dsn_through()` is the DSN to use instead."""

    def __init__(self, dsn: str) -> None:
        params = conninfo_to_dict(dsn)
        self._target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        self._params = params
        self._server: asyncio.Server | None = None
        self._marker: bytes | None = None
        self._mode: Literal["lose", "drop"] = "lose"
        self.done = asyncio.Event()

    async def __aenter__(self) -> ReplyProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    def dsn_through(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return make_conninfo(**{**self._params, "host": "127.0.0.1", "port": str(port)})

    def lose_reply(self, marker: str) -> None:
        self._marker, self._mode = marker.encode(), "lose"
        self.done.clear()

    def drop_request(self, marker: str) -> None:
        self._marker, self._mode = marker.encode(), "drop"
        self.done.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        swallow = asyncio.Event()

        def cut() -> None:
            writer.transport.abort()
            up_writer.transport.abort()
            self.done.set()

        async def upstream() -> None:
            while data := await reader.read(65536):
                if self._marker is not None and self._marker in data:
                    self._marker = None
                    if self._mode == "drop":
                        cut()
                        return
                    swallow.set()  # before forwarding: no byte of the answer gets through
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downstream() -> None:
            answer = b""
            while data := await up_reader.read(65536):
                if swallow.is_set():
                    answer += data
                    if answer[-6:-1] == _READY:  # the statement ran to its end (committed)
                        cut()
                        return
                    continue
                writer.write(data)
                await writer.drain()
            writer.close()

        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.gather(upstream(), downstream())
