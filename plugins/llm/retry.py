"""The per-route retry policy an `agent/request-error` executor consults (docs/retries.md)."""

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

    def allows(self, code: str, retry: int) -> bool:
        """Whether a failure with `code` may be retried for the `retry`-th time (1-based)."""
        if code not in self.retryable_codes:
            return False
        return self.mode == "always" or retry <= self.max_retries

    def backoff_ms(self, retry: int, rand: float) -> int:
        """The wait before the `retry`-th retry: exponential from `initial_delay_ms`, capped at
        `max_delay_ms`, scaled by a jitter factor in `[1 - jitter_ratio, 1 + jitter_ratio]`
        chosen by `rand` in `[0, 1)` (the cap also bounds the jittered value)."""
        exponential: int = min(self.initial_delay_ms * 2 ** min(retry - 1, 64), self.max_delay_ms)
        jitter = 1 - self.jitter_ratio + 2 * self.jitter_ratio * rand
        return round(min(exponential * jitter, self.max_delay_ms))
