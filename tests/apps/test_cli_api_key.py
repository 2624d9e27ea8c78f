"""The API key never leaks (docs/security.md): the real `dsh` with `config/overlays/openai.yml`
against a scripted server on 127.0.0.1, with keys a CRLF `.env` file or a paste produces.

Every spelling of the key (raw, `repr` of the str and of its bytes, JSON-escaped, percent- and
form-encoded, UTF-8 bytes read as Latin-1) is looked for in stderr and stdout of `run` and
`run --json`, in the session files (zstd decompressed), in `show`, `show --json` and
`sessions --json`.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
import zstandard
from dsh_sandbox import Sandbox
from sse_server import ChatServer, Handler, chat_server

OVERLAY = Path(__file__).resolve().parents[2] / "config" / "overlays" / "openai.yml"

Outputs = dict[str, bytes]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as running:
        yield running


def secret() -> str:
    return f"sk-{uuid.uuid4().hex}"


def forms(key: str) -> set[bytes]:
    """Every byte string that would show the key."""
    texts = {
        key,
        repr(key)[1:-1],
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1],
        quote(key, safe=""),
        quote_plus(key, safe=""),
        key.encode("utf-8").decode("latin-1"),
        repr(key.encode("utf-8"))[2:-1],
    }
    out = {text.encode("utf-8") for text in texts}
    try:
        latin = key.encode("latin-1")
    except UnicodeEncodeError:
        pass
    else:
        out |= {latin, repr(latin)[2:-1].encode(), quote(latin, safe="").encode()}
    # The key without its bad edge (what a leak of the stripped value would show).
    out.add(key.strip().encode("utf-8"))
    return out


def echoing_401(handler: Handler) -> None:
    """A hostile server: the key it received goes back in the body and in `x-request-id`."""
    key = handler.headers["Authorization"].removeprefix("Bearer ")
    message = f"bad key {key} / {key!r} / {quote(key)} / {key.encode('latin-1')!r}"
    body = json.dumps({"error": {"message": message}}).encode()
    handler.send_response(401)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.send_header("x-request-id", key)
    handler.send_header("x-echo", f"Bearer {key}")
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()


def env(server: ChatServer, key: str) -> dict[str, str]:
    return {
        "DSH_OPENAI_BASE_URL": server.base_url,
        "DSH_API_KEY_ENV": "DSH_TEST_KEY",
        "DSH_TEST_KEY": key,
    }


def stored_bytes(dsh: Sandbox) -> dict[str, bytes]:
    files = dsh.files()
    for name, data in files.items():
        if name.endswith(".zstd"):
            reader = zstandard.ZstdDecompressor().stream_reader(
                io.BytesIO(data), read_across_frames=True
            )
            files[name] = reader.read()
    return files


def run(dsh: Sandbox, server: ChatServer, key: str, session: str, *, human: bool) -> Outputs:
    """`run --json` (and, with `human`, the human `run --debug` of `<session>-h`), then
    `show --json` (and `show`) of each: every output as bytes, by name."""
    outputs: Outputs = {}
    for name, extra in ((f"{session}-h", ("--debug",)), (session, ("--json",)))[
        0 if human else 1 :
    ]:
        result = dsh(
            "run", "--session", name, *extra, "hi", "--patch", OVERLAY, env=env(server, key)
        )
        assert result.returncode == 1, result.stderr
        outputs[f"run {name} stdout"] = result.stdout.encode()
        outputs[f"run {name} stderr"] = result.stderr.encode()
        views = [("show", name, "--json")] + ([("show", name)] if human else [])
        for view in views:
            shown = dsh(*view)
            assert shown.returncode == 0, shown.stderr
            outputs[" ".join(view)] = shown.stdout.encode()
    return outputs


def listed(dsh: Sandbox) -> Outputs:
    result = dsh("sessions", "--json")
    assert result.returncode == 0, result.stderr
    return {"sessions --json": result.stdout.encode()}


def end_of(outputs: Outputs, session: str) -> dict[str, Any]:
    shown = [json.loads(line) for line in outputs[f"show {session} --json"].splitlines()]
    (end,) = [event["data"] for event in shown if event["type"] == "turn/end"]
    return end  # type: ignore[no-any-return]


def assert_nowhere(dsh: Sandbox, keys: list[str], outputs: Outputs) -> None:
    stored = stored_bytes(dsh)
    assert any(b'"turn/end"' in data for data in stored.values()), "no session log was read"
    everything = {**outputs, **stored}
    for key in keys:
        for form in forms(key):
            for name, data in everything.items():
                assert form not in data, (key, form, name)


UNUSABLE = {
    "\r": "it contains a control character such as CR or LF (a CRLF .env file?)",
    "\n": "it contains a control character such as CR or LF (a CRLF .env file?)",
    " ": "it starts or ends with whitespace",
    "-\u20ac": "it contains characters an HTTP header cannot carry (outside Latin-1)",
}


def test_an_unusable_key_is_one_auth_error_and_never_sent(dsh: Sandbox, server: ChatServer) -> None:
    """Keys ending in CR, LF or a space, or holding a non-Latin-1 character."""
    outputs: Outputs = {}
    keys: list[str] = []
    for n, (suffix, problem) in enumerate(UNUSABLE.items()):
        keys.append(secret() + suffix)
        outputs |= run(dsh, server, keys[-1], f"s-{n}", human=n == 0)
        message = f"environment variable DSH_TEST_KEY holds an unusable API key: {problem}"
        error = {"message": message, "code": "AUTH"}
        assert end_of(outputs, f"s-{n}")["reason"] == {"kind": "error", "error": error}
        said = outputs[f"run s-{n} stdout"] + outputs[f"run s-{n} stderr"]
        assert message.encode() in said, said
    human = outputs["run s-0-h stderr"].decode()
    assert f"✗ error: {message_of(0)} (AUTH)" in human.splitlines(), human
    assert "Traceback" not in human
    assert server.requests == []
    assert_nowhere(dsh, keys, outputs | listed(dsh))


def message_of(n: int) -> str:
    problem = list(UNUSABLE.values())[n]
    return f"environment variable DSH_TEST_KEY holds an unusable API key: {problem}"


def test_a_leading_space_is_refused_too(dsh: Sandbox, server: ChatServer) -> None:
    key = " " + secret()
    result = dsh("run", "hi", "--patch", OVERLAY, env=env(server, key))
    assert result.returncode == 1
    assert "holds an unusable API key: it starts or ends with whitespace (AUTH)" in result.stderr
    assert server.requests == []


def test_a_key_echoed_by_the_server_is_scrubbed_everywhere(
    dsh: Sandbox, server: ChatServer
) -> None:
    """Keys that can be sent (an inner space; Latin-1, quote, backslash and percent characters)
    come back from a hostile server in the error body and in `x-request-id`."""
    keys = [secret() + " with inner space", secret() + '-é"q\\uote%']
    server.script(*[echoing_401] * 3)
    outputs = run(dsh, server, keys[0], "s-space", human=True)
    outputs |= run(dsh, server, keys[1], "s-latin", human=False)
    assert [r["headers"]["authorization"] for r in server.requests] == [
        f"Bearer {keys[0]}",
        f"Bearer {keys[0]}",
        f"Bearer {keys[1]}",
    ]  # the keys themselves went out unchanged
    assert "✗ error: bad key *** / " in outputs["run s-space-h stderr"].decode()
    for session in ("s-space", "s-latin"):
        error = end_of(outputs, session)["reason"]["error"]
        assert (error["code"], error["status"]) == ("AUTH", 401)
        assert error["message"].startswith("bad key *** / "), error
        assert "requestId" not in error  # the echoed key is not an id
    assert_nowhere(dsh, keys, outputs | listed(dsh))
