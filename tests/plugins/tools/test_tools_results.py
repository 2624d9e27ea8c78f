"""Result shapes: the persisted camelCase JSON, reading it back, and exception messages."""

from __future__ import annotations

import pytest

from plugins.llm import HarnessError
from plugins.tools import (
    Accept,
    ToolExecutionResult,
    ToolFailure,
    aborted_before_dispatch_result,
    aborted_result,
    cancelled_result,
    exception_result,
)


def test_aborted_before_dispatch_result_is_the_binding_json() -> None:
    assert aborted_before_dispatch_result().to_json() == {
        "isError": True,
        "content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
        "error": {
            "message": "tool call aborted before dispatch",
            "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        },
    }


ABORTED_TEXT = (
    "tool call aborted while it ran: its effects may have happened; verify before retrying"
)
CUT_SHORT_TEXT = (
    "tool call cut short: it was cancelled mid-body after the cancellation grace, so its "
    "effects may have happened; verify before retrying"
)


def test_aborted_result_json_says_effects_may_have_happened() -> None:
    assert aborted_result().to_json() == {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {ABORTED_TEXT}"}],
        "error": {
            "message": ABORTED_TEXT,
            "info": {"name": "AbortError", "code": "ABORTED"},
        },
    }


def test_cancelled_result_json_is_tool_cancelled() -> None:
    assert cancelled_result().to_json() == {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {CUT_SHORT_TEXT}"}],
        "error": {
            "message": CUT_SHORT_TEXT,
            "info": {"name": "ToolCancelledError", "code": "TOOL_CANCELLED"},
        },
    }


def test_success_json_carries_value_and_optional_fields() -> None:
    result = ToolExecutionResult(
        is_error=False,
        content=[{"type": "text", "text": "null"}],
        value=None,
        meta={"m": 1},
        additional_contexts=["later"],
        concludes_turn=True,
    )
    data = result.to_json()
    assert data == {
        "isError": False,
        "content": [{"type": "text", "text": "null"}],
        "value": None,
        "meta": {"m": 1},
        "additionalContexts": ["later"],
        "concludesTurn": True,
    }
    assert ToolExecutionResult.from_json(data) == result


def test_from_json_of_a_failure_round_trips() -> None:
    result = exception_result(HarnessError("nope", "X_CODE"))
    assert ToolExecutionResult.from_json(result.to_json()) == result
    assert result.error == ToolFailure("nope", {"name": "HarnessError", "code": "X_CODE"})


def test_from_json_without_error_derives_the_message_from_content() -> None:
    result = ToolExecutionResult.from_json(
        {"isError": True, "content": [{"type": "text", "text": "bad"}]}
    )
    assert result.error == ToolFailure("bad")


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"content": []}, "isError must be a boolean"),
        ({"isError": False, "content": "x"}, "content must be a list of content blocks"),
        ({"isError": True, "content": [], "error": {"info": 1}}, "error must be an object"),
        (
            {"isError": True, "content": [], "error": {"message": "m", "info": {"name": 1}}},
            "error.info must be {name, code} strings",
        ),
    ],
)
def test_from_json_refuses_malformed_results(data: dict[str, object], text: str) -> None:
    with pytest.raises(TypeError, match=text.replace("{", r"\{").replace("}", r"\}")):
        ToolExecutionResult.from_json(data)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_exception_messages() -> None:
    assert exception_result(RuntimeError("boom")).to_json() == {
        "isError": True,
        "content": [{"type": "text", "text": "Error: boom"}],
        "error": {"message": "boom"},
    }
    assert exception_result(KeyError()).error == ToolFailure("KeyError")
    assert exception_result(_Unprintable()).error == ToolFailure("<unprintable thrown value>")


def test_accept_takes_content_or_value_not_both() -> None:
    with pytest.raises(TypeError, match="Accept takes content or value, not both"):
        Accept(content=[], value=1)
    assert Accept(value=None).replaces_value
    assert not Accept(content=[]).replaces_value
