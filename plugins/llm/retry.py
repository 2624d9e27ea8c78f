"""The per-route retry policy an `agent/request-error` executor consults (spec 03 §2.5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_RETRYABLE_CODES = ("EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT")


@dataclass(frozen=True)
class RetryPolicy:
    """How failures of one provider route may be retried (`always`: no retry limit).

    The llm service only stores it per route; an `agent/request-error` executor applies it.
    """

    mode: Literal["normal", "always"] = "normal"
    max_retries: int = 5
    retryable_codes: tuple[str, ...] = DEFAULT_RETRYABLE_CODES
    initial_delay_ms: int = 500
    max_delay_ms: int = 10000
    jitter_ratio: float = 0.1

    def __post_init__(self) -> None:
        if self.mode not in ("normal", "always"):
            raise ValueError(f'retry policy mode must be "normal" or "always", got {self.mode!r}')
        if self.max_retries < 0:
            raise ValueError("retry policy max_retries must be >= 0")
        if self.initial_delay_ms < 0 or self.max_delay_ms < self.initial_delay_ms:
            raise ValueError(
                "retry policy delays must satisfy 0 <= initial_delay_ms <= max_delay_ms"
            )
        if not 0 <= self.jitter_ratio <= 1:
            raise ValueError("retry policy jitter_ratio must be within [0, 1]")
