"""Where the replay cursor of a session starts in a new process: from the transcript's
`replayState` of the same script, else at 0."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.llm import GenerateOptions, assemble
from plugins.llm_replay import ReplayAdapter, ReplayResponse
from plugins.llm_replay.adapter import resumed_cursor, script_id
from plugins.llm_replay.chunks import input_tokens

pytestmark = pytest.mark.anyio

SCRIPT = [ReplayResponse(text=f"answer {n}") for n in range(3)]


def assistant(state: Any) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "model", "provider": "replay", "model": "m"}
    if state is not None:
        source["replayState"] = state
    return {"role": "assistant", "content": [], "source": source, "id": "x"}


USER = {"role": "user", "content": [{"type": "text", "text": "go"}], "source": {"kind": "user"}}


async def served(adapter: ReplayAdapter, messages: list[dict[str, Any]]) -> str:
    options = GenerateOptions(provider="replay", model="m", messages=messages, session_id="s")
    response = assemble([chunk async for chunk in adapter.stream(options)])
    text: str = response.blocks[0]["text"]
    return text


async def test_a_fresh_adapter_continues_after_the_scripts_last_response() -> None:
    own = script_id(SCRIPT)
    transcript = [
        USER,
        assistant({"script": own, "next": 1}),
        USER,
        assistant({"script": own, "next": 2}),
        USER,
    ]
    adapter = ReplayAdapter(SCRIPT)
    assert await served(adapter, transcript) == "answer 2"


async def test_the_served_finish_names_the_script_and_the_next_response() -> None:
    adapter = ReplayAdapter(SCRIPT)
    options = GenerateOptions(provider="replay", model="m", messages=[USER], session_id="s")
    chunks = [chunk async for chunk in adapter.stream(options)]
    assert chunks[-1]["replayState"] == {"script": script_id(SCRIPT), "next": 1}


@pytest.mark.parametrize(
    "state",
    [None, {"script": "another-script", "next": 2}, {"next": 2}, "2", {"script": "S", "next": -1}],
)
async def test_other_scripts_and_malformed_states_start_at_zero(state: Any) -> None:
    if isinstance(state, dict) and state.get("script") == "S":
        state = {**state, "script": script_id(SCRIPT)}
    assert await served(ReplayAdapter(SCRIPT), [USER, assistant(state), USER]) == "answer 0"


def test_the_latest_state_of_this_script_wins_over_other_scripts() -> None:
    own = script_id(SCRIPT)
    transcript = [assistant({"script": own, "next": 2}), assistant({"script": "other", "next": 7})]
    assert resumed_cursor(transcript, own) == 2


def test_the_script_id_is_stable_and_tells_scripts_apart() -> None:
    assert script_id(SCRIPT) == script_id([ReplayResponse(text=f"answer {n}") for n in range(3)])
    assert script_id(SCRIPT) != script_id(SCRIPT[:2])
    assert len(script_id(SCRIPT)) == 16


async def test_within_one_process_the_in_memory_cursor_is_kept() -> None:
    adapter = ReplayAdapter(SCRIPT)
    assert await served(adapter, [USER]) == "answer 0"
    # No replayState in the messages sent: the process's own cursor goes on.
    assert await served(adapter, [USER]) == "answer 1"


def tool_result(is_error: bool) -> dict[str, Any]:
    block = {"type": "tool-result", "toolCallId": "c", "content": [], "isError": is_error}
    return {"role": "user", "content": [block], "source": {"kind": "tool", "callId": "c"}}


@pytest.mark.parametrize(
    ("transcript", "expected"),
    [
        ([USER], "it worked"),
        ([USER, assistant(None), tool_result(False), tool_result(False)], "it worked"),
        ([USER, assistant(None), tool_result(False), tool_result(True)], "it failed"),
        # an error answered before the model's last message is not this answer's concern
        ([USER, assistant(None), tool_result(True), assistant(None), USER], "it worked"),
    ],
)
async def test_text_on_tool_error_replaces_the_text_after_a_failed_call(
    transcript: list[dict[str, Any]], expected: str
) -> None:
    script = [ReplayResponse(text="it worked", text_on_tool_error="it failed")]
    assert await served(ReplayAdapter(script), transcript) == expected


def test_text_on_tool_error_needs_a_text() -> None:
    with pytest.raises(ValueError, match="text_on_tool_error replaces text"):
        ReplayResponse(text_on_tool_error="it failed", tool_calls=[])


async def test_message_lengths_are_kept_for_the_latest_sessions_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import plugins.llm_replay.adapter as module

    monkeypatch.setattr(module, "_SIZED", 2)
    adapter = ReplayAdapter(SCRIPT)
    for session_id in ("a", "b", "a", "c"):
        options = GenerateOptions(
            provider="replay", model="m", messages=[USER], session_id=session_id
        )
        usage = [c async for c in adapter.stream(options) if c["type"] == "usage"]
        assert usage[0]["usage"]["inputTokens"] == input_tokens([USER])
    assert list(adapter._sizes) == ["a", "c"]  # "b" was served least recently
