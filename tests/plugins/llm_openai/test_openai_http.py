"""The OpenAI-compatible adapter against a real HTTP server on 127.0.0.1:0 (docs/models.md).

The server runs in a thread (`http.server`) and plays one scripted reply per request; replies
that must hang wait on a `threading.Event` released at teardown.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest

import plugins.llm
import plugins.llm_openai
from framework import AbortController, AbortSignal, Context
from plugins.llm import GenerateOptions, LlmService, StreamChunk, assemble

pytestmark = pytest.mark.anyio

KEY = "sk-test-SECRET-3f9a7c"
KEY_ENV = "DSH_TEST_OPENAI_KEY"

Reply = Callable[["Handler"], object]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.requests.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        reply = self.server.replies.popleft() if self.server.replies else error_reply(404, b"")
        try:
            reply(self)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- helpers used by replies --
    def start_sse(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[Reply] = deque()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def sse_events(*payloads: Any, done: bool = True) -> bytes:
    text = "".join(f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def sse_reply(*payloads: Any, done: bool = True, headers: dict[str, str] | None = None) -> Reply:
    def reply(handler: Handler) -> None:
        handler.start_sse(headers=headers)
        for payload in payloads:
            handler.chunk(sse_events(payload, done=False))
        if done:
            handler.chunk(b"data: [DONE]\n\n")
        handler.end_chunks()

    return reply


def error_reply(status: int, body: bytes, headers: dict[str, str] | None = None) -> Reply:
    def reply(handler: Handler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()

    return reply


def delta(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(extra)
    if content is not None:
        body["content"] = content
    return {"id": "x", "choices": [{"index": 0, "delta": body, "finish_reason": finish}]}


USAGE = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}}


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


async def mount(root: Context, server: Server, **config: Any) -> LlmService:
    await root.plugin(plugins.llm)
    await root.plugin(
        plugins.llm_openai, {"base_url": server.url, "api_key_env": KEY_ENV, **config}
    )
    llm: LlmService = root.llm
    return llm


def request(signal: AbortSignal | None = None, **extra: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="openai",
        model="gpt-test",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        signal=signal,
        **extra,
    )


async def collect(stream: Any) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def failure_of(chunks: list[StreamChunk]) -> tuple[str, dict[str, Any]]:
    reason = chunks[-1]["reason"]
    return reason["kind"], reason["failure"]


async def test_text_and_reasoning_stream_with_usage_and_request_body(
    server: Server, key: str
) -> None:
    server.replies.append(
        sse_reply(
            delta(role="assistant", reasoning_content="Let me "),
            delta(reasoning_content="think."),
            delta("Hello"),
            delta(" there", finish="stop"),
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 30,
                    "completion_tokens": 9,
                    "prompt_cache_hit_tokens": 10,
                },
            },
            headers={"x-request-id": "req-1"},
        )
    )
    async with Context() as root:
        llm = await mount(root, server, idempotency_header="Idempotency-Key")
        tools = [{"name": "read", "description": "Read a file", "parameters": {"type": "object"}}]
        got = await collect(
            llm.stream(
                request(
                    system="be brief",
                    tools=tools,
                    max_tokens=64,
                    temperature=0.5,
                    stop=["END"],
                    reasoning_effort="high",
                    idempotency_key="s:1:1",
                )
            )
        )
    assert got == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "Let me "},
        {"type": "reasoning-delta", "index": 0, "text": "think."},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "Hello"},
        {"type": "text-delta", "index": 1, "text": " there"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "Let me think."}},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "Hello there"}},
        {"type": "usage", "usage": {"inputTokens": 20, "outputTokens": 9, "cacheReadTokens": 10}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    [sent] = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert sent["headers"]["idempotency-key"] == "s:1:1"
    assert sent["body"] == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file",
                    "parameters": {"type": "object"},
                },
            }
        ],
        "max_tokens": 64,
        "temperature": 0.5,
        "stop": ["END"],
        "reasoning_effort": "high",
    }


async def test_tool_call_stream(server: Server, key: str) -> None:
    def call(index: int, **fields: Any) -> dict[str, Any]:
        return delta(tool_calls=[{"index": index, **fields}])

    server.replies.append(
        sse_reply(
            call(0, id="call_a", type="function", function={"name": "read", "arguments": ""}),
            call(1, id="call_b", type="function", function={"name": "list", "arguments": "{}"}),
            call(0, function={"arguments": '{"path":'}),
            call(0, function={"arguments": '"x"}'}),
            delta(finish="tool_calls"),
            USAGE,
        )
    )
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
    result = assemble(got)
    assert result.finish == {"kind": "tool-calls"}
    assert result.blocks == [
        {"type": "tool-call", "id": "call_a", "name": "read", "arguments": '{"path":"x"}'},
        {"type": "tool-call", "id": "call_b", "name": "list", "arguments": "{}"},
    ]
    assert result.usage == {"inputTokens": 12, "outputTokens": 5}
    assert "idempotency-key" not in server.requests[0]["headers"]  # no idempotency_header set
    assert got[:3] == [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_a",
            "name": "read",
            "argumentsDelta": "",
        },
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
    ]


@pytest.mark.parametrize(
    ("status", "body", "headers", "failure"),
    [
        (
            401,
            b'{"error":{"message":"Incorrect API key provided"}}',
            {"x-request-id": "req-401"},
            {
                "message": "Incorrect API key provided",
                "code": "AUTH",
                "status": 401,
                "requestId": "req-401",
            },
        ),
        (
            429,
            b'{"error":{"message":"Rate limit reached"}}',
            {"retry-after": "3"},
            {
                "message": "Rate limit reached",
                "code": "RATE_LIMIT",
                "status": 429,
                "providerRetryAfterMs": 3000,
            },
        ),
        (
            500,
            b"internal",
            {"retry-after-ms": "250"},
            {
                "message": "OpenAI-compatible API error (HTTP 500)",
                "code": "SERVER",
                "status": 500,
                "providerRetryAfterMs": 250,
            },
        ),
    ],
)
async def test_http_errors_become_one_error_finish(
    server: Server,
    key: str,
    status: int,
    body: bytes,
    headers: dict[str, str],
    failure: dict[str, Any],
) -> None:
    server.replies.append(error_reply(status, body, headers))
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
    assert got == [{"type": "finish", "reason": {"kind": "error", "failure": failure}}]


async def test_header_timeout(server: Server, key: str) -> None:
    server.replies.append(lambda handler: server.release.wait(10))
    async with Context() as root:
        llm = await mount(root, server, timeout_s=0.2)
        started = time.monotonic()
        got = await collect(llm.stream(request()))
    assert time.monotonic() - started < 5
    assert got == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": "OpenAI-compatible API timed out after 0.2s",
                    "code": "TIMEOUT",
                },
            },
        }
    ]


async def test_read_timeout_mid_stream_keeps_earlier_chunks(server: Server, key: str) -> None:
    def reply(handler: Handler) -> None:
        handler.start_sse()
        handler.chunk(sse_events(delta("partial"), done=False))
        server.release.wait(10)

    server.replies.append(reply)
    async with Context() as root:
        llm = await mount(root, server, timeout_s=0.2)
        got = await collect(llm.stream(request()))
    assert got[:2] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    ]
    assert failure_of(got) == (
        "error",
        {"message": "OpenAI-compatible API timed out after 0.2s", "code": "TIMEOUT"},
    )


async def test_dropped_stream_is_transport(server: Server, key: str) -> None:
    def reply(handler: Handler) -> None:
        handler.start_sse()
        handler.chunk(sse_events(delta("half"), done=False))
        handler.close_connection = True
        handler.wfile.write(b"ff\r\ntruncated")  # a chunk that never completes
        handler.wfile.flush()
        handler.connection.shutdown(2)

    server.replies.append(reply)
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
    assert got[1] == {"type": "text-delta", "index": 0, "text": "half"}
    kind, failure = failure_of(got)
    assert (kind, failure["code"]) == ("error", "TRANSPORT")
    assert failure["message"].startswith("OpenAI-compatible API transport error: ")


async def test_clean_end_without_done_is_stream_closed(server: Server, key: str) -> None:
    server.replies.append(sse_reply(delta("cut"), done=False, headers={"x-request-id": "req-7"}))
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
    assert failure_of(got) == (
        "error",
        {"message": "stream ended before [DONE]", "code": "STREAM_CLOSED", "requestId": "req-7"},
    )


async def test_malformed_event(server: Server, key: str) -> None:
    server.replies.append(sse_reply("{not json"))
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
    kind, failure = failure_of(got)
    assert (kind, failure["code"]) == ("error", "MALFORMED_RESPONSE")


async def test_abort_mid_stream(server: Server, key: str) -> None:
    def reply(handler: Handler) -> None:
        handler.start_sse()
        handler.chunk(sse_events(delta("first"), done=False))
        server.release.wait(10)

    server.replies.append(reply)
    controller = AbortController()
    async with Context() as root:
        llm = await mount(root, server)
        got: list[StreamChunk] = []
        started = time.monotonic()
        async for chunk in llm.stream(request(signal=controller.signal)):
            got.append(chunk)
            if chunk["type"] == "text-delta":
                controller.abort()
    assert time.monotonic() - started < 5
    assert failure_of(got) == (
        "aborted",
        {"message": "OpenAI-compatible request aborted", "code": "ABORTED"},
    )
    assert [c["type"] for c in got] == ["block-start", "text-delta", "finish"]


async def test_abort_while_waiting_for_headers(server: Server, key: str) -> None:
    server.replies.append(lambda handler: server.release.wait(10))
    controller = AbortController()
    async with Context() as root:
        llm = await mount(root, server)
        got: list[StreamChunk] = []
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                got.extend(await collect(llm.stream(request(signal=controller.signal))))

            tg.start_soon(consume)
            await anyio.sleep(0.05)
            controller.abort()
    assert failure_of(got)[0] == "aborted"
    assert failure_of(got)[1]["code"] == "ABORTED"


async def test_unset_key_and_no_auth(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    server.replies.append(sse_reply(delta("ok", finish="stop")))
    async with Context() as root:
        llm = await mount(root, server)
        got = await collect(llm.stream(request()))
        assert failure_of(got) == (
            "error",
            {"message": f"environment variable {KEY_ENV} is not set", "code": "AUTH"},
        )
        assert server.requests == []
        await root.plugin(
            plugins.llm_openai, {"base_url": server.url, "api_key_env": None, "provider": "open"}
        )
        got = await collect(llm.stream(GenerateOptions(provider="open", model="m", messages=[])))
    assert assemble(got).blocks == [{"type": "text", "text": "ok"}]
    assert "authorization" not in server.requests[0]["headers"]


async def test_model_defaults_and_retry_policy(server: Server, key: str) -> None:
    async with Context() as root:
        llm = await mount(
            root, server, max_tokens=512, context_window=64000, retry_policy={"max_retries": 1}
        )
        prepared = await llm.prepare_call({"provider": "openai", "model": "gpt-test"})
    assert prepared.config["maxTokens"] == 512
    assert prepared.adapter_defaults == {"maxTokens": True}
    assert prepared.context == {"provider": "openai", "model": "gpt-test", "contextWindow": 64000}
    assert prepared.retry_policy.max_retries == 1


async def test_key_never_leaks(server: Server, key: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    server.replies.append(error_reply(401, echo))
    server.replies.append(sse_reply(delta("fine", finish="stop"), USAGE))
    async with Context() as root:
        llm = await mount(root, server)
        failed = await collect(llm.stream(request()))
        succeeded = await collect(llm.stream(request()))
        fiber_reprs = repr(root.llm) + repr(llm._routes)
    assert failure_of(failed) == (
        "error",
        {"message": "Incorrect API key provided: ***", "code": "AUTH", "status": 401},
    )
    assert assemble(succeeded).blocks == [{"type": "text", "text": "fine"}]
    config = plugins.llm_openai.Config(api_key_env=KEY_ENV)
    surfaces = [
        json.dumps(failed),
        json.dumps(succeeded),
        caplog.text,
        fiber_reprs,
        repr(config),
        config.model_dump_json(),
    ]
    assert all(KEY not in text for text in surfaces)
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"
    assert "HTTP Request: POST" in caplog.text  # the client's logs were captured (and are clean)
