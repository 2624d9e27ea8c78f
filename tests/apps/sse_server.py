"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1:0 for `dsh` process tests.

It runs in a thread (`http.server`), records every request (path, lower-cased headers, JSON body)
and plays one scripted reply per request; a request beyond the script gets a 404. A reply made by
`hanging_reply` sends its events, then blocks until `release` is set (at teardown).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    """Records the request, then runs the next scripted reply."""

    protocol_version = "HTTP/1.1"
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        record = {
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": json.loads(self.rfile.read(length)),
        }
        with self.server.lock:
            self.server.requests.append(record)
            reply = self.server.replies.popleft() if self.server.replies else None
        try:
            (reply or error_reply(404, b'{"error":{"message":"no scripted reply"}}'))(self)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class ChatServer(ThreadingHTTPServer):
    """The server: `requests` seen so far, `replies` still to play, `release` for hung replies."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[Reply] = deque()
        self.release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def wait_for_requests(self, count: int, alive: Callable[[], bool], timeout: float = 30) -> None:
        """Wait until `count` requests arrived; fail early when `alive()` turns false."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert alive(), "the client exited before sending its request"
            assert time.monotonic() < deadline, f"request {count} never arrived"
            time.sleep(0.01)


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    """A running server, shut down (hung replies released) on exit."""
    server = ChatServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def _event(payload: Any) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def sse_reply(*payloads: Any) -> Reply:
    """Stream `payloads` as `data:` events (one HTTP chunk each), then `[DONE]`."""

    def reply(handler: Handler) -> None:
        handler.start_sse()
        for payload in payloads:
            handler.chunk(_event(payload))
        handler.chunk(b"data: [DONE]\n\n")
        handler.chunk(b"")

    return reply


def hanging_reply(*payloads: Any) -> Reply:
    """Stream `payloads`, then hold the response open until the server is released."""

    def reply(handler: Handler) -> None:
        handler.start_sse()
        for payload in payloads:
            handler.chunk(_event(payload))
        handler.server.release.wait(60)

    return reply


def error_reply(status: int, body: bytes) -> Reply:
    """A plain JSON error response."""

    def reply(handler: Handler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    return reply


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    """One chat-completion chunk whose single choice carries `fields` as its delta."""
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A delta chunk opening wire tool call 0 with its whole argument string."""
    return delta(
        tool_calls=[
            {
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    )


def usage(prompt: int, completion: int) -> dict[str, Any]:
    """The final usage chunk (`stream_options.include_usage`)."""
    return {
        "id": "chatcmpl-1",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }
