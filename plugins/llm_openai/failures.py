"""HTTP error responses → `LlmError` codes, and retry-after parsing (docs/models.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from plugins.llm import LlmError

_CONTEXT_MARKERS = ("context_length", "context length", "maximum context", "context window")


def http_error(status: int, headers: Mapping[str, str], body: bytes, now: float) -> LlmError:
    """The failure of a non-2xx response (`now`: epoch seconds, for HTTP-date retry-after)."""
    error = _error_object(body)
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = f"OpenAI-compatible API error (HTTP {status})"
    return LlmError(
        message,
        _code(status, error, message),
        status=status,
        provider_retry_after_ms=retry_after_ms(headers, now),
        request_id=headers.get("x-request-id") or None,
    )


def _code(status: int, error: Mapping[str, Any], message: str) -> str:
    if status in (401, 403):
        return "AUTH"
    if status == 429:
        return (
            "QUOTA"
            if "insufficient_quota" in (error.get("code"), error.get("type"))
            else ("RATE_LIMIT")
        )
    if status in (400, 413):
        text = f"{error.get('code') or ''} {message}".lower()
        if any(marker in text for marker in _CONTEXT_MARKERS):
            return "CONTEXT_WINDOW_EXCEEDED"
        return "INVALID_REQUEST"
    if status == 408:
        return "TIMEOUT"
    if status >= 500:
        return "SERVER"
    return f"HTTP_{status}"


def _error_object(body: bytes) -> Mapping[str, Any]:
    try:
        payload = json.loads(body)
    except ValueError:
        return {}
    error = payload.get("error") if isinstance(payload, Mapping) else None
    return error if isinstance(error, Mapping) else {}


def retry_after_ms(headers: Mapping[str, str], now: float) -> int | None:
    """`retry-after-ms` (milliseconds), else `retry-after` (seconds or an HTTP date), as ms."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        value = _number(raw_ms)
        if value is not None:
            return math.ceil(value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return math.ceil(seconds * 1000)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(math.ceil((when.timestamp() - now) * 1000), 0)


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
