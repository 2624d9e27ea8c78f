"""Pure parts of the OpenAI-compatible adapter: transcript, SSE, decoding, error mapping."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from plugins.llm import GenerateOptions, LlmError
from plugins.llm_openai import OpenAIAdapter
from plugins.llm_openai.decode import ChatStreamDecoder
from plugins.llm_openai.failures import http_error, retry_after_ms
from plugins.llm_openai.sse import SseDecoder
from plugins.llm_openai.transcript import MISSING_RESULT, to_wire_messages, transcript_call_ids


def user(text: str) -> dict[str, Any]:
    return {
        "id": "u",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"id": "a", "role": "assistant", "content": list(blocks), "source": {"kind": "model"}}


def call(call_id: str, name: str = "t", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}


def result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "isError": False,
            }
        ],
        "source": {"kind": "tool", "callId": call_id},
    }


def wire_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "t", "arguments": "{}"}}


# -- transcript ----------------------------------------------------------------------------------


def test_basic_conversion_system_first_reasoning_dropped() -> None:
    wire = to_wire_messages(
        "be brief",
        [
            user("hi"),
            assistant(
                {"type": "reasoning", "text": "hmm"},
                {"type": "text", "text": "calling"},
                call("c1"),
            ),
            result("c1", "done"),
            assistant({"type": "text", "text": "a"}, {"type": "text", "text": "b"}),
        ],
    )
    assert wire == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "calling", "tool_calls": [wire_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": "a\nb"},
    ]


def test_echo_reasoning_sends_reasoning_content() -> None:
    wire = to_wire_messages(
        None,
        [user("q"), assistant({"type": "reasoning", "text": "think"}, call("c1")), result("c1")],
        echo_reasoning=True,
    )
    assert wire[1] == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "think",
        "tool_calls": [wire_call("c1")],
    }


def test_assistant_without_text_or_calls_is_not_sent() -> None:
    interrupted = assistant({"type": "reasoning", "text": "cut off"})
    assert to_wire_messages(None, [user("q"), interrupted, user("again")], echo_reasoning=True) == [
        {"role": "user", "content": "q"},
        {"role": "user", "content": "again"},
    ]
    assert to_wire_messages(None, [user("q"), assistant()]) == [{"role": "user", "content": "q"}]


def test_every_tool_call_gets_exactly_one_result() -> None:
    wire = to_wire_messages(
        None,
        [
            user("q"),
            result("ghost"),  # no such call: dropped
            assistant(call("c1"), call("c2"), call("c3")),
            result("c2"),
            result("c2", "duplicate"),  # answered already: dropped
            user("steer"),  # c1 and c3 are still open: patched before this message
            result("c1", "late"),  # c1 was patched: dropped
            assistant(call("c4")),  # never answered: patched at the end
        ],
    )
    assert wire == [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [wire_call("c1"), wire_call("c2"), wire_call("c3")],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        {"role": "tool", "tool_call_id": "c1", "content": MISSING_RESULT},
        {"role": "tool", "tool_call_id": "c3", "content": MISSING_RESULT},
        {"role": "user", "content": "steer"},
        {"role": "assistant", "content": None, "tool_calls": [wire_call("c4")]},
        {"role": "tool", "tool_call_id": "c4", "content": MISSING_RESULT},
    ]


def test_images_are_unsupported() -> None:
    image = {"role": "user", "content": [{"type": "image", "data": "..."}]}
    with pytest.raises(LlmError) as caught:
        to_wire_messages(None, [image])
    assert caught.value.code == "UNSUPPORTED_CONTENT"
    image_result = result("c1")
    image_result["content"][0]["content"] = [{"type": "image", "data": "..."}]
    with pytest.raises(LlmError, match="image"):
        to_wire_messages(None, [assistant(call("c1")), image_result])


# -- SSE -------------------------------------------------------------------------------------------


def test_sse_decoder() -> None:
    decoder = SseDecoder()
    lines = [": keepalive", "event: message", 'data: {"a":', "data:1}", "", "", "data: [DONE]"]
    assert [decoder.feed(line) for line in lines] == [
        None,
        None,
        None,
        None,
        '{"a":\n1}',
        None,
        None,
    ]
    assert decoder.flush() == "[DONE]"
    assert decoder.flush() is None


# -- decoding --------------------------------------------------------------------------------------


def event(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def test_decoder_streams_deltas_and_closes_at_done() -> None:
    decoder = ChatStreamDecoder()
    out = decoder.event(event({"role": "assistant", "content": ""}))
    out += decoder.event(event({"content": "Hi"}))
    out += decoder.event(
        event(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": ""},
                    }
                ]
            }
        )
    )
    out += decoder.event(
        event({"tool_calls": [{"index": 0, "function": {"arguments": '{"p":1}'}}]})
    )
    out += decoder.event(event(finish="tool_calls"))
    out += decoder.event(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 60},
                "completion_tokens_details": {"reasoning_tokens": 3},
            },
        }
    )
    closing, failure = decoder.done()
    assert failure is None
    assert out + closing == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hi"},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "call_1",
            "name": "read",
            "argumentsDelta": "",
        },
        {"type": "tool-call-delta", "index": 1, "id": "call_1", "argumentsDelta": '{"p":1}'},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hi"}},
        {
            "type": "block-end",
            "index": 1,
            "block": {"type": "tool-call", "id": "call_1", "name": "read", "arguments": '{"p":1}'},
        },
        {
            "type": "usage",
            "usage": {
                "inputTokens": 40,
                "outputTokens": 7,
                "cacheReadTokens": 60,
                "reasoningTokens": 3,
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


@pytest.mark.parametrize(
    ("finish", "kind", "code"),
    [
        ("length", "max-tokens", None),
        ("stop", "stop", None),
        (None, "stop", None),
        ("content_filter", None, "CONTENT_FILTER"),
    ],
)
def test_decoder_finish_reasons(finish: str | None, kind: str | None, code: str | None) -> None:
    decoder = ChatStreamDecoder()
    decoder.event(event({"content": "x"}, finish))
    closing, failure = decoder.done()
    if kind is not None:
        assert failure is None
        assert closing[-1] == {"type": "finish", "reason": {"kind": kind}}
    else:
        assert failure is not None
        assert (str(failure), failure.code) == (f"model stopped: {finish}", code)
        assert closing[-1]["type"] == "block-end"


def test_stop_without_blocks_is_empty_response() -> None:
    decoder = ChatStreamDecoder()
    decoder.event(event({"content": ""}, "stop"))
    closing, failure = decoder.done()
    assert closing == []
    assert failure is not None
    assert (str(failure), failure.code) == (
        "model returned a completed response with no content",
        "EMPTY_RESPONSE",
    )


def test_decoder_rejects_non_objects() -> None:
    with pytest.raises(LlmError) as caught:
        ChatStreamDecoder().event([1])
    assert caught.value.code == "MALFORMED_RESPONSE"


# -- HTTP errors -----------------------------------------------------------------------------------


def headers(**values: str) -> httpx.Headers:
    return httpx.Headers({key.replace("_", "-"): value for key, value in values.items()})


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (401, b"{}", "AUTH"),
        (403, b"{}", "AUTH"),
        (429, b'{"error":{"message":"slow down","type":"requests"}}', "RATE_LIMIT"),
        (429, b'{"error":{"message":"pay up","code":"insufficient_quota"}}', "QUOTA"),
        (400, b'{"error":{"message":"bad field"}}', "INVALID_REQUEST"),
        (413, b"too big", "INVALID_REQUEST"),
        (
            400,
            b'{"error":{"message":"This model\'s maximum context length is 8192 tokens"}}',
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (
            400,
            b'{"error":{"message":"x","code":"context_length_exceeded"}}',
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (408, b"", "TIMEOUT"),
        (500, b"", "SERVER"),
        (503, b"<html>", "SERVER"),
        (404, b"", "HTTP_404"),
    ],
)
def test_http_error_codes(status: int, body: bytes, code: str) -> None:
    error = http_error(status, headers(), body, 0)
    assert error.code == code
    assert error.failure["status"] == status


def test_http_error_message_and_metadata() -> None:
    error = http_error(500, headers(x_request_id="req-9", retry_after="2"), b"oops", 0)
    assert error.failure == {
        "message": "OpenAI-compatible API error (HTTP 500)",
        "code": "SERVER",
        "status": 500,
        "providerRetryAfterMs": 2000,
        "requestId": "req-9",
    }
    assert str(http_error(401, headers(), b'{"error":{"message":"bad key"}}', 0)) == "bad key"


def test_retry_after_forms() -> None:
    assert retry_after_ms(headers(retry_after_ms="1500.2", retry_after="9"), 0) == 1501
    assert retry_after_ms(headers(retry_after="0.25"), 0) == 250
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC), usegmt=True)
    assert retry_after_ms(headers(retry_after=later), now.timestamp()) == 30000
    assert retry_after_ms(headers(retry_after="soon"), 0) is None
    assert retry_after_ms(headers(), 0) is None


def test_request_body_minimal_and_model_fallback() -> None:
    adapter = OpenAIAdapter(httpx.AsyncClient(), model="fallback-model")
    body = adapter.request_body(GenerateOptions(provider="openai", model="", messages=[user("x")]))
    assert body == {
        "model": "fallback-model",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    named = GenerateOptions(provider="openai", model="m", messages=[])
    assert adapter.request_body(named)["model"] == "m"


def _call_ids(decoder: ChatStreamDecoder, *wire_ids: str | None) -> list[str]:
    calls = [
        {"index": n, **({} if wire_id is None else {"id": wire_id}), "function": {"name": "f"}}
        for n, wire_id in enumerate(wire_ids)
    ]
    decoder.event(event({"tool_calls": calls}))
    decoder.event(event(finish="tool_calls"))
    closing, failure = decoder.done()
    assert failure is None
    return [c["block"]["id"] for c in closing if c["type"] == "block-end"]


def test_call_ids_are_kept_when_they_are_new() -> None:
    assert _call_ids(ChatStreamDecoder({"call_a"}), "call_b", "call_c") == ["call_b", "call_c"]


def test_missing_or_reused_call_ids_are_made_unique() -> None:
    # a server that numbers calls afresh per response, or sends no id, or one id twice
    used = {"call_0", "call-0"}
    ids = _call_ids(ChatStreamDecoder(used), "call_0", None, "x", "x", "")
    assert ids == ["call-1", "call-2", "x", "call-3", "call-4"]
    assert len(set(ids) | used) == len(ids) + len(used)


def test_the_transcripts_call_ids_are_the_assistant_tool_calls() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "ok"},
                {"type": "tool-call", "id": "c1", "name": "f", "arguments": "{}"},
                {"type": "tool-call", "id": "c2", "name": "f", "arguments": "{}"},
            ],
        },
        {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "content": []}]},
    ]
    assert transcript_call_ids(messages) == {"c1", "c2"}
