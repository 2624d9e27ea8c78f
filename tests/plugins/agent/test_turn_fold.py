"""`TurnFold` on hand-built events: repair results, and calls an earlier turn left waiting."""

from __future__ import annotations

from typing import Any

from plugins.agent import ToolCall, ToolResult, ToolRun
from plugins.agent.results import TurnFold, find_call
from plugins.session.repair import TOOL_NOT_STARTED_ERROR, TOOL_OUTCOME_UNKNOWN_ERROR
from plugins.session_persistence.testing import event


def tool_call(seq: int, turn: int, call_id: str, name: str) -> dict[str, Any]:
    data = {"turn": turn, "step": 1, "callId": call_id, "name": name, "arguments": '{"x":1}'}
    return event(seq, "tool/call", data)


def tool_result(
    seq: int, turn: int, call_id: str, text: str, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
        "isError": error is not None,
    }
    message = {"role": "tool", "content": [block], "source": {"kind": "tool", "callId": call_id}}
    data: dict[str, Any] = {"turn": turn, "step": 1, "message": message}
    if error is not None:
        data["error"] = error
    return event(seq, "tool/result", data)


def fold(events: list[dict[str, Any]], fold: TurnFold) -> list[Any]:
    return [item for e in events for item in fold.add(e)]


def test_a_repair_result_names_its_repair_code() -> None:
    items = fold(
        [
            event(0, "turn/start", {"turn": 1}),
            tool_call(1, 1, "c1", "write"),
            tool_result(2, 1, "c1", "unknown", dict(TOOL_OUTCOME_UNKNOWN_ERROR)),
            tool_call(3, 1, "c2", "write"),
            tool_result(4, 1, "c2", "not started", dict(TOOL_NOT_STARTED_ERROR)),
            tool_call(5, 1, "c3", "write"),
            tool_result(6, 1, "c3", "refused", {"name": "ToolArgsError", "code": "INVALID_ARGS"}),
        ],
        TurnFold("s"),
    )
    results = [item for item in items if isinstance(item, ToolResult)]
    assert [r.repair for r in results] == ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED", None]
    assert all(r.is_error for r in results)


def test_a_call_an_earlier_turn_made_is_resolved_in_this_one() -> None:
    earlier = [
        event(0, "turn/start", {"turn": 1}),
        tool_call(1, 1, "asked", "write_file"),
        tool_call(2, 1, "done", "read_file"),
        tool_result(3, 1, "done", "ok"),
        event(4, "turn/end", {"turn": 1, "reason": {"kind": "blocked"}}),
    ]
    asked = find_call(earlier, "asked")
    assert asked == ToolCall("asked", "write_file", {"x": 1}, 1)
    assert find_call(earlier, "never") is None
    turn_fold = TurnFold("s", lambda call_id: find_call(earlier, call_id))
    items = fold(
        [
            tool_result(5, 1, "done", "before the turn: not this turn's"),
            event(6, "turn/start", {"turn": 2}),
            tool_result(7, 1, "asked", "written"),  # the approved call, of turn 1
            event(8, "turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
            tool_result(9, 1, "done", "after the turn: not this turn's"),
        ],
        turn_fold,
    )
    (result,) = [item for item in items if isinstance(item, ToolResult)]
    assert (result.call_id, result.name, result.text, result.step) == (
        "asked",
        "write_file",
        "written",
        1,
    )
    assert turn_fold.result is not None
    assert turn_fold.result.tool_calls == [ToolRun(asked, result)]
