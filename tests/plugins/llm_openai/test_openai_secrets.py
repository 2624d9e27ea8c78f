"""The API key rule of the OpenAI-compatible adapter: validation, scrubbing (docs/security.md)."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote, quote_plus

import pytest

from plugins.llm import HarnessError, LlmError
from plugins.llm_openai.secrets import REDACTED, ApiKey, LogScrubber, scrubbed_failure

ENV = "DSH_TEST_SECRET_KEY"
KEY = 'sk-Ab1 é"\\%/+'
CONTROL = "it contains a control character such as CR or LF (a CRLF .env file?)"
EDGE = "it starts or ends with whitespace"
LATIN = "it contains characters an HTTP header cannot carry (outside Latin-1)"


def read(monkeypatch: pytest.MonkeyPatch, value: str) -> ApiKey:
    monkeypatch.setenv(ENV, value)
    return ApiKey.read(ENV)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("sk-abc\r", CONTROL),
        ("sk-abc\n", CONTROL),
        ("sk-a\r\nbc", CONTROL),
        ("sk-a\tbc", CONTROL),
        ("sk-a\x01bc", CONTROL),
        ("sk-a\x7fbc", CONTROL),
        ("sk-a\x85bc", CONTROL),  # a C1 control (NEL)
        ("sk-abc ", EDGE),
        (" sk-abc", EDGE),
        ("sk-abc\u00a0", EDGE),  # a no-break space
        ("sk-abc\u20ac", LATIN),
        ("sk-\U0001f511", LATIN),
    ],
)
def test_unusable_keys_are_one_auth_error_without_the_key(
    monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    with pytest.raises(LlmError) as caught:
        read(monkeypatch, value)
    assert caught.value.failure == {
        "message": f"environment variable {ENV} holds an unusable API key: {problem}",
        "code": "AUTH",
    }


def test_an_unset_or_empty_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(LlmError, match=f"^environment variable {ENV} is not set$"):
        ApiKey.read(ENV)
    monkeypatch.setenv(ENV, "")
    with pytest.raises(LlmError, match="is not set"):
        ApiKey.read(ENV)


def test_a_usable_key_goes_out_as_latin_1_and_hides_in_repr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = read(monkeypatch, KEY)
    assert key.authorization() == b"Bearer " + KEY.encode("latin-1")
    assert repr(key) == f"ApiKey(env={ENV!r})"
    assert KEY not in repr(key)
    assert KEY not in str(key)


@pytest.mark.parametrize(
    "form",
    [
        KEY,
        repr(KEY)[1:-1],
        repr(KEY.encode("utf-8"))[2:-1],
        repr(KEY.encode("latin-1"))[2:-1],
        json.dumps(KEY)[1:-1],
        json.dumps(KEY, ensure_ascii=False)[1:-1],
        json.dumps(KEY)[1:-1].upper(),  # \u00E9 as well as \u00e9
        quote(KEY, safe=""),
        quote(KEY, safe="").lower(),  # %c3%a9 as well as %C3%A9
        quote_plus(KEY, safe=""),
        quote(KEY.encode("latin-1"), safe=""),
        KEY.encode("utf-8").decode("latin-1"),  # UTF-8 bytes shown as Latin-1 text
    ],
)
def test_every_form_of_the_key_is_scrubbed(monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    key = read(monkeypatch, KEY)
    assert key.scrub(f"before {form} after") == f"before {REDACTED} after"


def test_a_failure_is_scrubbed_and_an_echoed_request_id_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = read(monkeypatch, KEY)
    error = LlmError(
        f"Illegal header value {('Bearer ' + KEY).encode('latin-1')!r}",
        "AUTH",
        status=401,
        provider_retry_after_ms=5,
        request_id=f"req-{KEY}",
    )
    assert scrubbed_failure(error, key).failure == {
        "message": f"Illegal header value b'Bearer {REDACTED}'",
        "code": "AUTH",
        "status": 401,
        "providerRetryAfterMs": 5,
    }
    kept = scrubbed_failure(LlmError("busy", "SERVER", request_id="req-1"), key)
    assert kept.failure == {"message": "busy", "code": "SERVER", "requestId": "req-1"}


def test_any_exception_becomes_a_scrubbed_llm_error(monkeypatch: pytest.MonkeyPatch) -> None:
    key = read(monkeypatch, KEY)
    plain = scrubbed_failure(ValueError(f"bad {KEY!r}"), key)
    assert plain.failure == {"message": f"bad '{REDACTED}'", "code": "UNKNOWN"}
    coded = scrubbed_failure(HarnessError(f"x {KEY}", "UNSUPPORTED_CONTENT"), key)
    assert coded.failure == {"message": f"x {REDACTED}", "code": "UNSUPPORTED_CONTENT"}
    assert scrubbed_failure(RuntimeError(), None).failure == {
        "message": "LLM adapter failed",
        "code": "UNKNOWN",
    }
    same = LlmError("kept", "SERVER")
    assert scrubbed_failure(same, None) is same


def test_the_http_client_logs_are_scrubbed_while_installed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV, KEY)
    headers = [(b"x-request-id", KEY.encode("latin-1"))]
    detach = LogScrubber(ENV).install()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("httpcore.http11").debug("headers=%r", headers)
        logging.getLogger("httpx").info("HTTP Request: %s", f"POST {KEY}")
        detach()
        logging.getLogger("httpx").info("after: %s", KEY)
    assert [record.getMessage() for record in caplog.records] == [
        f"headers=[(b'x-request-id', b'{REDACTED}')]",
        f"HTTP Request: POST {REDACTED}",
        f"after: {KEY}",  # detached: the filter left with the plugin
    ]
