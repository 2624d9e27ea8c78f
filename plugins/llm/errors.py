"""The harness error base class and the LLM error carrying a persisted failure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.errors import DshError
from plugins.llm.types import LlmFailure


class HarnessError(DshError):
    """An error with a stable machine-readable `code` and a display `name` (the class name)."""

    def __init__(self, message: str, code: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name if name is not None else type(self).__name__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {self.code!r})"


class LlmError(HarnessError):
    """A model request failure; `.failure` is the persisted `LlmFailure` JSON object.

    `LlmError("replay aborted", "ABORTED")` builds the failure; `LlmError(failure)` re-raises a
    failure read from a finish chunk (the dict is copied).
    """

    failure: LlmFailure

    def __init__(
        self,
        message: str | Mapping[str, Any],
        code: str | None = None,
        *,
        status: int | None = None,
        provider_retry_after_ms: int | None = None,
        request_id: str | None = None,
    ) -> None:
        if isinstance(message, Mapping):
            if code is not None:
                raise TypeError("LlmError(failure) takes no separate code")
            failure = make_failure(
                str(message.get("message", "")),
                str(message.get("code", "UNKNOWN")),
                status=message.get("status"),
                provider_retry_after_ms=message.get("providerRetryAfterMs"),
                request_id=message.get("requestId"),
            )
        else:
            failure = make_failure(
                message,
                code if code is not None else "UNKNOWN",
                status=status,
                provider_retry_after_ms=provider_retry_after_ms,
                request_id=request_id,
            )
        super().__init__(failure["message"], failure["code"])
        self.failure = failure


def make_failure(
    message: str,
    code: str,
    *,
    status: int | None = None,
    provider_retry_after_ms: int | None = None,
    request_id: str | None = None,
) -> LlmFailure:
    """Build an `LlmFailure` in persisted key order, omitting unset optional fields."""
    failure: LlmFailure = {"message": message, "code": code}
    if status is not None:
        failure["status"] = status
    if provider_retry_after_ms is not None:
        failure["providerRetryAfterMs"] = provider_retry_after_ms
    if request_id is not None:
        failure["requestId"] = request_id
    return failure
