"""The API key: validated before use and scrubbed, in every form, from what the adapter reports.

This module is the one place of the rule (docs/security.md): `ApiKey.read` refuses a key that
cannot be sent as it is (control characters such as a CR or LF left by a CRLF `.env` file,
whitespace at either end, characters outside Latin-1) with one `AUTH` error that names the
variable, never the key. `scrubbed_failure` turns anything the adapter raises into the
`LlmError` it reports, with every form of the key (raw, `repr`-escaped as str or bytes,
JSON-escaped, percent-encoded, bytes read as Latin-1) replaced by `REDACTED` in each text, and a
`requestId` that carried the key dropped. `LogScrubber` does the same to every record of the HTTP
client's loggers (their debug traces print the response headers a hostile server may echo the
key in).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_from_bytes

from plugins.llm import HarnessError, LlmError

REDACTED = "***"


class ApiKey:
    """A validated key read from an environment variable; its repr never shows the value."""

    __slots__ = ("_pattern", "_value", "env")

    def __init__(self, env: str, value: str) -> None:
        self.env = env
        self._value = value
        forms = sorted(_forms(value), key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, forms)), re.IGNORECASE)

    def __repr__(self) -> str:
        return f"ApiKey(env={self.env!r})"

    @classmethod
    def read(cls, env: str) -> ApiKey:
        """The key in `env`; `LlmError` `AUTH` if it is unset or unusable."""
        value = os.environ.get(env)
        if not value:
            raise LlmError(f"environment variable {env} is not set", "AUTH")
        problem = _problem(value)
        if problem is not None:
            raise LlmError(
                f"environment variable {env} holds an unusable API key: {problem}", "AUTH"
            )
        return cls(env, value)

    def authorization(self) -> bytes:
        """The `Authorization` header value (Latin-1 bytes, as HTTP sends them)."""
        return b"Bearer " + self._value.encode("latin-1")

    def scrub(self, text: str) -> str:
        """`text` with every form of the key replaced by `REDACTED`."""
        return self._pattern.sub(REDACTED, text)


def scrubbed_failure(error: Exception, key: ApiKey | None) -> LlmError:
    """`error` as an `LlmError` (non-LLM errors: their message and code, else `UNKNOWN`), its
    texts scrubbed of `key` (None: no key was used, nothing to scrub)."""
    if isinstance(error, LlmError):
        failure: dict[str, Any] = dict(error.failure)
    else:
        code = error.code if isinstance(error, HarnessError) else "UNKNOWN"
        failure = {"message": str(error) or "LLM adapter failed", "code": code}
    if key is None:
        return error if isinstance(error, LlmError) else LlmError(failure)
    for field in ("message", "code"):
        failure[field] = key.scrub(str(failure[field]))
    request_id = failure.get("requestId")
    if isinstance(request_id, str) and key.scrub(request_id) != request_id:
        del failure["requestId"]
    return LlmError(failure)


class LogScrubber(logging.Filter):
    """Scrubs the key held in the variable `env` from the records of the `httpx` and `httpcore`
    loggers (a logger's filters do not reach its children, so each one gets it)."""

    LOGGERS = (
        "httpx",
        "httpcore.connection",
        "httpcore.http11",
        "httpcore.http2",
        "httpcore.proxy",
        "httpcore.socks",
    )

    def __init__(self, env: str) -> None:
        super().__init__()
        self._env = env
        self._cached: tuple[str, ApiKey] | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message without the key; never drops a record."""
        value = os.environ.get(self._env)
        if not value:
            return True
        if self._cached is None or self._cached[0] != value:
            self._cached = (value, ApiKey(self._env, value))
        message = record.getMessage()
        scrubbed = self._cached[1].scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True

    def install(self) -> Callable[[], None]:
        """Attach to every `httpx` / `httpcore` logger; returns the detacher."""
        names = set(self.LOGGERS) | {
            name
            for name in list(logging.root.manager.loggerDict)
            if name.split(".")[0] in ("httpx", "httpcore")
        }
        loggers = [logging.getLogger(name) for name in sorted(names)]
        for logger in loggers:
            logger.addFilter(self)

        def detach() -> None:
            for logger in loggers:
                logger.removeFilter(self)

        return detach


def _problem(value: str) -> str | None:
    if any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in value):
        return "it contains a control character such as CR or LF (a CRLF .env file?)"
    if value != value.strip():
        return "it starts or ends with whitespace"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "it contains characters an HTTP header cannot carry (outside Latin-1)"
    return None


def _forms(value: str) -> set[str]:
    """Every spelling of `value` an error text may carry."""
    forms = {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    for encoding in ("utf-8", "latin-1"):
        try:
            raw = value.encode(encoding)
        except UnicodeEncodeError:
            continue
        forms.add(repr(raw)[2:-1])
        forms.add(raw.decode("latin-1"))
        forms.add(quote_from_bytes(raw, safe=""))
        forms.add(quote_from_bytes(raw, safe="").replace("%20", "+"))
    forms.discard("")
    return forms
