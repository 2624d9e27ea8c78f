"""Model-request retries in the default app: `dsh` + `config/overlays/openai.yml` against a real
HTTP server on 127.0.0.1 that fails, then answers (see docs/retries.md)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dsh_sandbox import Sandbox
from sse_server import ChatServer, Handler, Reply, chat_server, delta, sse_reply, usage

OVERLAY = Path(__file__).resolve().parents[2] / "config" / "overlays" / "openai.yml"
ENV = {"DSH_API_KEY_ENV": "DSH_TEST_KEY", "DSH_TEST_KEY": "sk-retry-test"}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def failing(status: int, headers: dict[str, str] | None = None) -> Reply:
    """A JSON error response with extra headers (e.g. `retry-after-ms`)."""
    body = json.dumps({"error": {"message": f"scripted {status}"}}).encode()

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


def content_then_drop(handler: Handler) -> None:
    """Stream one text delta, then close the connection mid-body (no `[DONE]`, no last chunk)."""
    handler.start_sse()
    handler.chunk(b'data: {"choices":[{"index":0,"delta":{"content":"Half an an"}}]}\n\n')
    handler.close_connection = True


def answer(text: str) -> Reply:
    return sse_reply(delta(content=text), delta(finish="stop"), usage(10, 2))


def env(server: ChatServer) -> dict[str, str]:
    return {"DSH_OPENAI_BASE_URL": server.base_url, **ENV}


def events(dsh: Sandbox, session_id: str) -> list[dict[str, Any]]:
    shown = dsh("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def of(stored: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event["data"] for event in stored if event["type"] == kind]


def test_server_errors_are_retried_and_the_turn_completes(dsh: Sandbox, server: ChatServer) -> None:
    server.script(
        failing(500),  # no retry-after: the policy's first backoff, 500 ms ± 10 %
        failing(429, {"retry-after-ms": "40"}),
        answer("Recovered."),
    )
    result = dsh("run", "--session", "s-retry", "hi", "--patch", OVERLAY, env=env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Recovered.\n"
    assert len(server.requests) == 3
    assert "retry 1 in " in result.stderr
    assert "retry 2 in 40 ms: scripted 429 (RATE_LIMIT)" in result.stderr

    stored = events(dsh, "s-retry")
    retries = of(stored, "llm/retry")
    assert [(r["retry"], r["failure"]["code"], r["failure"]["status"]) for r in retries] == [
        (1, "SERVER", 500),
        (2, "RATE_LIMIT", 429),
    ]
    assert 450 <= retries[0]["delayMs"] <= 550
    assert retries[1]["delayMs"] == 40
    assert retries[1]["failure"]["providerRetryAfterMs"] == 40
    assert [r["retry"] for r in of(stored, "llm/retry-started")] == [1, 2]
    assert [end["reason"] for end in of(stored, "turn/end")] == [{"kind": "completed"}]
    assert "retry 1 after" in dsh("show", "s-retry").stdout


def test_json_output_has_a_line_per_retry(dsh: Sandbox, server: ChatServer) -> None:
    server.script(failing(429, {"retry-after-ms": "30"}), answer("Recovered."))
    args = ("run", "--json", "--session", "s-json-retry", "hi", "--patch", OVERLAY)
    result = dsh(*args, env=env(server))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["session", "retry", "text", "result"]
    assert lines[1] == {
        "type": "retry",
        "retry": 1,
        "delayMs": 30,
        "code": "RATE_LIMIT",
        "message": "scripted 429",
    }


def test_no_retry_once_the_response_streamed_content(dsh: Sandbox, server: ChatServer) -> None:
    server.script(content_then_drop, answer("must not be requested"))
    result = dsh("run", "--session", "s-drop", "hi", "--patch", OVERLAY, env=env(server))
    assert result.returncode == 1, result.stderr
    assert len(server.requests) == 1
    stored = events(dsh, "s-drop")
    assert of(stored, "llm/retry") == []
    (end,) = of(stored, "turn/end")
    assert end["reason"]["kind"] == "error"
    assert end["reason"]["error"]["code"] == "TRANSPORT"


def test_ctrl_c_during_the_backoff_ends_the_run_promptly(dsh: Sandbox, server: ChatServer) -> None:
    server.script(failing(503, {"retry-after-ms": "30000"}), answer("too late"))
    process = subprocess.Popen(
        dsh.argv("run", "--session", "s-wait", "hi", "--patch", OVERLAY),
        cwd=dsh.root,
        env=dsh.env(env(server)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        seen = b""
        deadline = time.monotonic() + 30
        while b"retry 1 in 30000 ms" not in seen:
            assert time.monotonic() < deadline, seen
            line = process.stderr.readline()
            assert line, seen
            seen += line
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 130
        elapsed = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert elapsed < 5
    assert len(server.requests) == 1
    stored = events(dsh, "s-wait")
    assert len(of(stored, "llm/retry")) == 1
    assert of(stored, "llm/retry-started") == []
    assert [end["reason"] for end in of(stored, "turn/end")] == [
        {"kind": "aborted", "reason": {"kind": "user"}}
    ]
