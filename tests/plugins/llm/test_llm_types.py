"""Errors, failures, options and the retry policy (docs/agent-loop.md)."""

from __future__ import annotations

import dataclasses

import pytest

import plugins.llm
from plugins.llm import GenerateOptions, HarnessError, LlmError, RetryPolicy
from plugins.llm.errors import HarnessError as HarnessErrorFromModule


def test_harness_error_has_name_and_code() -> None:
    class ToolNotFoundError(HarnessError):
        pass

    error = ToolNotFoundError('unknown tool "x"', "UNKNOWN_TOOL")
    assert str(error) == 'unknown tool "x"'
    assert (error.name, error.code) == ("ToolNotFoundError", "UNKNOWN_TOOL")
    assert HarnessError("m", "C", name="AbortError").name == "AbortError"
    assert HarnessErrorFromModule is HarnessError


def test_llm_error_builds_failure_in_persisted_order() -> None:
    error = LlmError(
        "slow down", "RATE_LIMIT", status=429, provider_retry_after_ms=1500, request_id="req-1"
    )
    assert isinstance(error, HarnessError)
    assert (error.name, error.code, str(error)) == ("LlmError", "RATE_LIMIT", "slow down")
    assert list(error.failure.items()) == [
        ("message", "slow down"),
        ("code", "RATE_LIMIT"),
        ("status", 429),
        ("providerRetryAfterMs", 1500),
        ("requestId", "req-1"),
    ]
    assert LlmError("replay aborted", "ABORTED").failure == {
        "message": "replay aborted",
        "code": "ABORTED",
    }


def test_llm_error_from_failure_copies_it() -> None:
    failure = {"message": "boom", "code": "SERVER", "status": 503}
    error = LlmError(failure)
    assert error.failure == failure
    assert error.failure is not failure
    assert (str(error), error.code) == ("boom", "SERVER")
    with pytest.raises(TypeError):
        LlmError(failure, "X")


def test_generate_options_are_frozen_with_spec_fields() -> None:
    options = GenerateOptions(provider="p", model="m", messages=[])
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.model = "x"  # type: ignore[misc]
    names = {f.name for f in dataclasses.fields(GenerateOptions)}
    assert names == {
        "provider",
        "model",
        "messages",
        "system",
        "tools",
        "reasoning_effort",
        "temperature",
        "max_tokens",
        "stop",
        "signal",
        "session_id",
        "purpose",
        "idempotency_key",
    }


def test_retry_policy_defaults_and_validation() -> None:
    policy = RetryPolicy()
    assert (
        policy.mode,
        policy.max_retries,
        policy.initial_delay_ms,
        policy.max_delay_ms,
        policy.jitter_ratio,
    ) == ("normal", 5, 500, 10000, 0.1)
    assert policy.retryable_codes == (
        "EMPTY_RESPONSE",
        "RATE_LIMIT",
        "SERVER",
        "TIMEOUT",
        "TRANSPORT",
    )
    with pytest.raises(ValueError, match="mode"):
        RetryPolicy(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delays"):
        RetryPolicy(initial_delay_ms=20, max_delay_ms=10)


def test_plugin_module_shape() -> None:
    assert plugins.llm.name == "llm"
    assert callable(plugins.llm.apply)
