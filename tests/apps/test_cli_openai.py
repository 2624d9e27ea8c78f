"""`dsh` with `config/overlays/openai.yml` against a scripted OpenAI-compatible server.

The real console script talks HTTP + SSE to a server on 127.0.0.1:0 (`sse_server`); the tests
check the Chat Completions requests it sends across a tool step, a resumed turn (reasoning echoed
back), a SIGKILL and a Ctrl-C mid-request, and a 401, and that the API key never reaches disk
or output.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from dsh_sandbox import Sandbox
from sse_server import (
    ChatServer,
    Reply,
    chat_server,
    delta,
    error_reply,
    hanging_reply,
    sse_reply,
    tool_call,
    usage,
)

OVERLAY = Path(__file__).resolve().parents[2] / "config" / "overlays" / "openai.yml"
REASONING = "The user wants notes; write_file is the tool for that."
NOTES = {"path": "notes.txt", "content": "durable logs\n"}


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


@pytest.fixture
def key() -> str:
    """A secret that can only show up where the key leaked."""
    return f"sk-test-{uuid.uuid4().hex}"


def _env(server: ChatServer, key: str) -> dict[str, str]:
    return {
        "DSH_OPENAI_BASE_URL": server.base_url,
        "DSH_API_KEY_ENV": "DSH_TEST_KEY",
        "DSH_TEST_KEY": key,
    }


def _dsh(
    dsh: Sandbox, server: ChatServer, key: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return dsh(*args, "--patch", str(OVERLAY), env=_env(server, key))


def _write_notes_step(call_id: str) -> Reply:
    return sse_reply(
        delta(role="assistant", reasoning_content=REASONING[:20]),
        delta(reasoning_content=REASONING[20:]),
        tool_call(call_id, "write_file", NOTES),
        delta(finish="tool_calls"),
        usage(40, 12),
    )


def _text_step(text: str) -> Reply:
    return sse_reply(delta(content=text), delta(finish="stop"), usage(60, 4))


def _start(
    dsh: Sandbox, server: ChatServer, key: str, *args: str, stderr: int = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """Start `dsh *args --patch openai.yml` in the background."""
    return subprocess.Popen(
        dsh.argv(*args, "--patch", OVERLAY),
        cwd=dsh.root,
        env=dsh.env(_env(server, key)),
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def _messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = request["body"]["messages"]
    return messages


def _assert_consistent(messages: list[dict[str, Any]]) -> None:
    """Every tool call is answered exactly once, right after its assistant message."""
    expected: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] == expected.pop(0), messages
            continue
        assert not expected, f"unanswered tool calls {expected}: {messages}"
        if message["role"] == "assistant":
            assert message.get("content") or message.get("tool_calls"), message
            expected = [call["id"] for call in message.get("tool_calls", [])]
    assert not expected, messages


def _stored_text(dsh: Sandbox) -> dict[str, bytes]:
    """Every file under the home and the workspace, zstd session logs decompressed."""
    files = dsh.files()
    for name, data in files.items():
        if name.endswith(".zstd"):
            reader = zstandard.ZstdDecompressor().stream_reader(
                io.BytesIO(data), read_across_frames=True
            )
            files[name] = reader.read()
    return files


class _Pump:
    """Reads a child's stderr in a thread (so it never blocks on a full pipe)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stderr is not None
        self._pipe = process.stderr
        self._seen = bytearray()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while data := os.read(self._pipe.fileno(), 4096):
            with self._changed:
                self._seen.extend(data)
                self._changed.notify_all()

    def wait_for(self, text: bytes, timeout: float = 30) -> None:
        with self._changed:
            found = self._changed.wait_for(lambda: text in self._seen, timeout)
            assert found, self._seen.decode(errors="replace")

    def text(self) -> str:
        """Everything written, once the child has exited."""
        self._thread.join(5)
        self._pipe.close()
        return self._seen.decode()


def _assert_no_key(dsh: Sandbox, key: str, *outputs: str) -> None:
    for text in outputs:
        assert key not in text
    stored = _stored_text(dsh)
    assert any(b'"turn/end"' in data for data in stored.values()), "no session log was read"
    for name, data in stored.items():
        assert key.encode() not in data, name


def test_tool_step_then_resume_echoes_reasoning(dsh: Sandbox, server: ChatServer, key: str) -> None:
    server.script(_write_notes_step("call_w1"), _text_step("Wrote notes.txt."))
    first = _dsh(dsh, server, key, "run", "--session", "s-openai", "write the notes")
    assert first.returncode == 0, first.stderr
    assert first.stdout == "Wrote notes.txt.\n"
    assert (dsh.workspace / "notes.txt").read_text() == NOTES["content"]

    assert len(server.requests) == 2
    for request in server.requests:
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == f"Bearer {key}"
        body = request["body"]
        assert body["model"] == "deepseek-chat"
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        names = {tool["function"]["name"] for tool in body["tools"]}
        assert {"write_file", "read_file", "list_files"} <= names
        assert all(tool["type"] == "function" for tool in body["tools"])
        assert _messages(request)[0]["role"] == "system"
    one, two = (_messages(request) for request in server.requests)
    assert one[1:] == [{"role": "user", "content": "write the notes"}]
    assistant, result = two[2:]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "reasoning_content": REASONING,
        "tool_calls": [
            {
                "id": "call_w1",
                "type": "function",
                "function": {"name": "write_file", "arguments": json.dumps(NOTES)},
            }
        ],
    }
    assert result["role"] == "tool"
    assert result["tool_call_id"] == "call_w1"
    assert json.loads(result["content"]) == {"path": "notes.txt", "bytes": len(NOTES["content"])}
    _assert_consistent(two)

    # Turn 2 in a new process (with --debug logging): the history comes back from disk.
    server.script(_text_step("Again, done."))
    second = _dsh(dsh, server, key, "resume", "s-openai", "again", "--debug")
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Again, done.\n"
    three = _messages(server.requests[2])
    assert three[1:] == [
        *two[1:],
        {"role": "assistant", "content": "Wrote notes.txt."},
        {"role": "user", "content": "again"},
    ]
    assert three[2]["reasoning_content"] == REASONING
    _assert_consistent(three)
    assert server.requests[2]["headers"]["authorization"] == f"Bearer {key}"

    shown = dsh("show", "s-openai", "--json")
    assert shown.returncode == 0, shown.stderr
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    ends = [event["data"]["reason"]["kind"] for event in events if event["type"] == "turn/end"]
    assert ends == ["completed", "completed"]
    usages = [event["data"]["usage"] for event in events if event["type"] == "assistant/message"]
    assert usages == [
        {"inputTokens": 40, "outputTokens": 12},
        {"inputTokens": 60, "outputTokens": 4},
        {"inputTokens": 60, "outputTokens": 4},
    ]
    _assert_no_key(dsh, key, first.stdout, first.stderr, second.stdout, second.stderr, shown.stdout)


def test_a_server_that_reuses_call_ids_still_gets_a_consistent_transcript(
    dsh: Sandbox, server: ChatServer, key: str
) -> None:
    # Some OpenAI-compatible servers number calls afresh in every response.
    second = {"path": "more.txt", "content": "more\n"}
    server.script(
        _write_notes_step("call_0"),
        sse_reply(tool_call("call_0", "write_file", second), delta(finish="tool_calls")),
        _text_step("Both written."),
    )
    done = _dsh(dsh, server, key, "run", "--session", "s-ids", "write both")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Both written.\n"
    assert (dsh.workspace / "more.txt").read_text() == "more\n"
    last = _messages(server.requests[2])
    _assert_consistent(last)
    ids = [call["id"] for m in last if m["role"] == "assistant" for call in m["tool_calls"]]
    assert ids == ["call_0", "call-0"]


def test_sigkill_during_the_model_request_then_resume(
    dsh: Sandbox, server: ChatServer, key: str
) -> None:
    server.script(
        _write_notes_step("call_w1"),
        hanging_reply(delta(role="assistant", reasoning_content="Now I will")),
    )
    process = _start(dsh, server, key, "run", "--session", "s-kill", "write the notes")
    try:
        server.wait_for_requests(2, alive=lambda: process.poll() is None)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()

    server.script(_text_step("Carrying on."))
    resumed = _dsh(dsh, server, key, "resume", "s-kill", "continue")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "Carrying on.\n"
    assert "recovered: turn 1 closed as interrupted" in resumed.stderr
    messages = _messages(server.requests[2])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[2]["tool_calls"][0]["id"] == "call_w1"
    assert messages[-1] == {"role": "user", "content": "continue"}
    _assert_consistent(messages)
    _assert_no_key(dsh, key, resumed.stdout, resumed.stderr)


def test_sigint_mid_reasoning_leaves_no_empty_assistant_message(
    dsh: Sandbox, server: ChatServer, key: str
) -> None:
    """Ctrl-C while only reasoning streamed: the interrupted message (no text, no calls) is
    stored but not sent back; the transcript stays valid."""
    server.script(hanging_reply(delta(role="assistant", reasoning_content="Thinking hard")))
    process = _start(
        dsh, server, key, "run", "--session", "s-int", "write the notes", stderr=subprocess.PIPE
    )
    try:
        stderr = _Pump(process)
        stderr.wait_for(b"Thinking hard")  # the delta reached dsh (it echoes reasoning)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "(response interrupted)" in stderr.text()

    shown = dsh("show", "s-int", "--json")
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    (interrupted,) = [e["data"] for e in events if e["type"] == "assistant/message"]
    assert interrupted["interrupted"] is True
    assert interrupted["message"]["content"] == [{"type": "reasoning", "text": "Thinking hard"}]

    server.script(_text_step("Resumed."))
    resumed = _dsh(dsh, server, key, "resume", "s-int", "continue")
    assert resumed.returncode == 0, resumed.stderr
    messages = _messages(server.requests[1])
    assert [m["role"] for m in messages] == ["system", "user", "user"]
    assert messages[1:] == [
        {"role": "user", "content": "write the notes"},
        {"role": "user", "content": "continue"},
    ]


def test_unauthorized_is_one_error_line(dsh: Sandbox, server: ChatServer, key: str) -> None:
    body = json.dumps({"error": {"message": "Authentication Fails (invalid key)"}}).encode()
    server.script(error_reply(401, body))
    result = _dsh(dsh, server, key, "run", "--session", "s-401", "hello")
    assert result.returncode == 1
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["✗ error: Authentication Fails (invalid key) (AUTH)"], result.stderr
    assert "Traceback" not in result.stderr
    assert len(server.requests) == 1
    _assert_no_key(dsh, key, result.stdout, result.stderr)


def test_unauthorized_failure_is_reported_once(dsh: Sandbox, server: ChatServer, key: str) -> None:
    body = json.dumps({"error": {"message": "Authentication Fails (invalid key)"}}).encode()
    server.script(error_reply(401, body))
    result = _dsh(dsh, server, key, "run", "--session", "s-401", "hello")
    assert result.returncode == 1
    mentions = [line for line in result.stderr.splitlines() if "Authentication Fails" in line]
    assert len(mentions) == 1, result.stderr
