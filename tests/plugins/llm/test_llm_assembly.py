"""Block assembly rules (docs/models.md)."""

from __future__ import annotations

from plugins.llm import BlockAssembler, assemble, chunks


def test_blocks_follow_first_seen_index_order_and_deltas_append() -> None:
    result = assemble(
        [
            chunks.block_start(1, "text"),
            chunks.reasoning_delta(0, "think"),
            chunks.text_delta(1, "Hel"),
            chunks.reasoning_delta(0, "ing"),
            chunks.text_delta(1, "lo"),
            chunks.finish(chunks.stop_reason("stop")),
        ]
    )
    assert result.blocks == [
        {"type": "text", "text": "Hello"},
        {"type": "reasoning", "text": "thinking"},
    ]
    assert result.finish == {"kind": "stop"}


def test_first_block_end_wins_and_later_deltas_are_ignored() -> None:
    result = assemble(
        [
            chunks.block_start(0, "text"),
            chunks.text_delta(0, "draft"),
            chunks.block_end(0, chunks.text_block("final")),
            chunks.text_delta(0, " ignored"),
            chunks.block_end(0, chunks.text_block("second end ignored")),
        ]
    )
    assert result.blocks == [{"type": "text", "text": "final"}]


def test_open_tool_call_assembles_from_deltas_with_default_id() -> None:
    result = assemble(
        [
            chunks.block_start(0, "tool-call"),
            {
                "type": "tool-call-delta",
                "index": 0,
                "id": "",
                "name": "read",
                "argumentsDelta": "{",
            },
            chunks.tool_call_delta(0, "", "}"),
            chunks.tool_call_delta(1, "c-1", '{"a":1}', name="write"),
        ]
    )
    assert result.blocks == [
        {"type": "tool-call", "id": "call-0", "name": "read", "arguments": "{}"},
        {"type": "tool-call", "id": "c-1", "name": "write", "arguments": '{"a":1}'},
    ]


def test_no_finish_means_stop_and_last_usage_and_finish_win() -> None:
    assert assemble([chunks.text_delta(0, "x")]).finish == {"kind": "stop"}
    result = assemble(
        [
            chunks.usage({"inputTokens": 1, "outputTokens": 1}),
            chunks.finish(chunks.stop_reason("stop")),
            chunks.usage({"inputTokens": 2, "outputTokens": 3}),
            chunks.finish(chunks.stop_reason("tool-calls")),
        ]
    )
    assert result.usage == {"inputTokens": 2, "outputTokens": 3}
    assert result.finish == {"kind": "tool-calls"}
    assert assemble([]).usage is None


def test_max_tokens_drops_tool_calls() -> None:
    result = assemble(
        [
            chunks.text_delta(0, "partial"),
            chunks.tool_call_delta(1, "c", "{", name="t"),
            chunks.finish(chunks.stop_reason("max-tokens")),
        ]
    )
    assert result.blocks == [{"type": "text", "text": "partial"}]


def test_interrupted_blocks_keep_non_blank_text_and_reasoning_only() -> None:
    assembler = BlockAssembler()
    for chunk in [
        chunks.reasoning_delta(0, "plan"),
        chunks.text_delta(1, "  \n"),
        chunks.tool_call_delta(2, "c", "{}", name="t"),
        chunks.block_start(3, "image"),
        chunks.text_delta(4, "answer"),
    ]:
        assembler.add(chunk)
    assert assembler.interrupted_blocks() == [
        {"type": "reasoning", "text": "plan"},
        {"type": "text", "text": "answer"},
    ]
    # An open image has no data: it is dropped from the assembled blocks too.
    assert [block["type"] for block in assembler.blocks()] == [
        "reasoning",
        "text",
        "tool-call",
        "text",
    ]


def test_delta_of_another_kind_does_not_change_a_block() -> None:
    result = assemble([chunks.block_start(0, "text"), chunks.reasoning_delta(0, "x")])
    assert result.blocks == [{"type": "text", "text": ""}]


def test_chunk_constructors_use_persisted_key_order() -> None:
    assert list(chunks.tool_call_delta(0, "id", "{}", name="n")) == [
        "type",
        "index",
        "id",
        "name",
        "argumentsDelta",
    ]
    assert "name" not in chunks.tool_call_delta(0, "id", "")
    assert chunks.finish({"kind": "stop"}, replay_state={"k": 1}) == {
        "type": "finish",
        "reason": {"kind": "stop"},
        "replayState": {"k": 1},
    }
