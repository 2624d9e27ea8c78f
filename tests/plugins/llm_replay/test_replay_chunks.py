"""The replay chunk sequence and script validation (docs/models.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from plugins.llm import assemble
from plugins.llm_replay.chunks import MessageSizes, input_tokens, pieces, response_chunks
from plugins.llm_replay.script import ReplayResponse, load_script

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "héllo"}]}]


def test_pieces_are_consecutive_slices() -> None:
    assert pieces("abcdefghij", 4) == ["abcd", "efgh", "ij"]
    assert pieces("", 4) == []


def test_reasoning_text_and_tool_calls_in_order() -> None:
    response = ReplayResponse.model_validate(
        {
            "reasoning": "think hard",
            "text": "Hello world",
            "tool_calls": [
                {"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}},
                {"id": "c2", "name": "noop", "arguments": ""},
            ],
        }
    )
    out = list(response_chunks(response, MESSAGES, 8))
    assert out == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "think ha"},
        {"type": "reasoning-delta", "index": 0, "text": "rd"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "think hard"}},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "Hello wo"},
        {"type": "text-delta", "index": 1, "text": "rld"},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "Hello world"}},
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "c1",
            "name": "read_file",
            "argumentsDelta": '{"path":',
        },
        {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": '"a.txt"}'},
        {
            "type": "block-end",
            "index": 2,
            "block": {
                "type": "tool-call",
                "id": "c1",
                "name": "read_file",
                "arguments": '{"path":"a.txt"}',
            },
        },
        {"type": "block-start", "index": 3, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 3, "id": "c2", "name": "noop", "argumentsDelta": ""},
        {
            "type": "block-end",
            "index": 3,
            "block": {"type": "tool-call", "id": "c2", "name": "noop", "arguments": ""},
        },
        {
            "type": "usage",
            "usage": {
                "inputTokens": math.ceil(
                    len(json.dumps(MESSAGES, separators=(",", ":"), ensure_ascii=False)) / 4
                ),
                "outputTokens": math.ceil((10 + 11 + 16) / 4),
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    assert assemble(out).blocks[1] == {"type": "text", "text": "Hello world"}


def test_empty_text_has_no_block_and_finish_is_stop() -> None:
    out = list(response_chunks(ReplayResponse(text=""), [], 8))
    assert out == [
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 0}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def test_string_arguments_are_sent_verbatim() -> None:
    response = ReplayResponse.model_validate(
        {"tool_calls": [{"id": "c", "name": "t", "arguments": "{not json"}]}
    )
    ends = [c for c in response_chunks(response, [], 100) if c["type"] == "block-end"]
    assert ends[0]["block"]["arguments"] == "{not json"


def test_message_sizes_count_like_input_tokens_and_encode_only_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import plugins.llm_replay.chunks as module

    encoded: list[Any] = []
    real = module._compact

    def counting(value: Any) -> str:
        encoded.append(value)
        return real(value)

    monkeypatch.setattr(module, "_compact", counting)
    sizes = MessageSizes()
    first = {"role": "user", "content": [{"type": "text", "text": "ü" * 9}]}
    second = {"role": "assistant", "content": [], "source": {"n": 1.5}}
    third = {"role": "user", "content": [{"type": "text", "text": "\u2028 and 😀"}]}
    assert sizes.input_tokens([]) == input_tokens([]) == 1
    for messages in ([first], [first, second], [first, second, third]):
        encoded.clear()
        assert sizes.input_tokens(messages) == input_tokens(messages)
        assert encoded[0] is messages[-1]  # only the new message, before input_tokens' list
        assert len(encoded) == 2
    # An equal copy is not the same object: it is encoded again (a replaced surface node).
    encoded.clear()
    copy = dict(second, content=[{"type": "text", "text": "longer now"}])
    assert sizes.input_tokens([first, copy]) == input_tokens([first, copy])
    assert encoded[0] is copy


def test_input_tokens_formula() -> None:
    assert input_tokens([]) == 1  # "[]" is 2 characters
    assert input_tokens([{"a": "ü" * 10}]) == math.ceil(len('[{"a":"' + "ü" * 10 + '"}]') / 4)


def test_item_validation() -> None:
    with pytest.raises(ValueError, match="a response needs one of text, tool_calls or error"):
        ReplayResponse.model_validate({"reasoning": "only"})
    with pytest.raises(ValueError, match="an error response cannot also have"):
        ReplayResponse.model_validate({"text": "x", "error": {"code": "SERVER"}})
    assert ReplayResponse.model_validate({"error": {"code": "X"}}).error is not None
    assert ReplayResponse.model_validate({"error": {"code": "X"}}).error.message == (  # type: ignore[union-attr]
        "replayed failure"
    )


def test_load_script_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "script.yml"
    yaml_file.write_text("- text: hi\n- tool_calls: [{id: c, name: t, arguments: {a: 1}}]\n")
    json_file = tmp_path / "script.json"
    json_file.write_text('[{"text": "hi"}]')
    assert [r.text for r in load_script(yaml_file)] == ["hi", None]
    assert load_script(json_file)[0].text == "hi"
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    assert load_script(empty) == []


def test_load_script_errors_name_the_file_and_item(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("- text: ok\n- {text: x, extra: 1}\n")
    with pytest.raises(ValueError) as caught:
        load_script(bad)
    assert str(caught.value) == (
        f"invalid replay file {bad}:\n  - Extra inputs are not permitted (at 1.extra)"
    )
    with pytest.raises(ValueError, match=r"cannot read replay file .*missing\.yml"):
        load_script(tmp_path / "missing.yml")
    broken = tmp_path / "broken.json"
    broken.write_text("[")
    with pytest.raises(ValueError, match=r"cannot parse replay file .*broken\.json"):
        load_script(broken)
