"""A turn's end reason as one line, and the reason of a turn whose end is not durable.

`agents.run()` / `agents.stream()` flush the session once more after the turn; when that fails,
the result does not say what the turn said but `not_durable(...)` (docs/python-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The `error.code` of a turn whose end could not be made durable.
NOT_DURABLE = "SESSION_NOT_DURABLE"


def reason_text(reason: Mapping[str, Any] | None) -> str:
    """`completed`, `aborted (user)`, `error: <message> (<code>)`, `interrupted`, ..."""
    if reason is None:
        return "-"
    kind = str(reason.get("kind"))
    if kind == "aborted":
        cause = reason.get("reason")
        cause_kind = cause.get("kind") if isinstance(cause, dict) else None
        return f"aborted ({cause_kind})" if cause_kind else "aborted"
    if kind == "error":
        failure = reason.get("error")
        if isinstance(failure, dict):
            return f"error: {failure.get('message')} ({failure.get('code')})"
    return kind


def not_durable(reason: Mapping[str, Any], error: BaseException) -> dict[str, Any]:
    """The reason reported for a turn that ended with `reason` but whose end storing failed
    with `error`: an `error` reason with code `SESSION_NOT_DURABLE`, the turn's own reason kept
    as `turnReason`."""
    return {
        "kind": "error",
        "error": {
            "code": NOT_DURABLE,
            "message": (
                f"the turn ended ({reason_text(reason)}) but storing it failed: {describe(error)}"
            ),
        },
        "turnReason": dict(reason),
    }


def leaf(error: BaseException) -> BaseException:
    """The one meaningful exception inside (nested) single-member exception groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def describe(error: BaseException) -> str:
    """An error's message on one line; an exception group names each of its members (an
    append and its failed rollback) instead of "(2 sub-exceptions)"."""
    error = leaf(error)
    if isinstance(error, BaseExceptionGroup):
        parts = "; ".join(dict.fromkeys(describe(member) for member in error.exceptions))
        return f"{error.message}: {parts}"
    return one_line(str(error)) or type(error).__name__


def one_line(text: str) -> str:
    """A multi-line message (a head and `- item` lines, items possibly `title:` plus their own
    items) as `head: item; item; title: item`."""
    lines = [line.strip().removeprefix("- ") for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    out = lines[0]
    for index, line in enumerate(lines[1:]):
        if out.endswith(":"):
            out += " " + line
        else:
            out += (": " if index == 0 else "; ") + line
    return out
