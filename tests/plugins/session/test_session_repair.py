"""Crash repair closers (docs/checkpoint-policy.md), row by row, plus idempotence properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.session.jsonutil import dumps
from plugins.session.repair import (
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN_TEXT,
    interrupted_turn_closers,
)


class Log:
    """Builds a minimal valid log with incrementing seqs and times."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, data: Any, **extra: Any) -> Log:
        seq = len(self.events)
        self.events.append({"type": kind, "seq": seq, "time": 1000 + seq, "data": data, **extra})
        return self

    def turn(self, turn: int = 1) -> Log:
        return self.add("turn/start", {"turn": turn})

    def end_turn(self, turn: int = 1) -> Log:
        return self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def step(self, step: int = 1, turn: int = 1) -> Log:
        return self.add("step/start", {"turn": turn, "step": step})

    def end_step(self, step: int = 1, turn: int = 1) -> Log:
        return self.add("step/end", {"turn": turn, "step": step})

    def calls(self, *call_ids: str, step: int = 1, turn: int = 1) -> Log:
        content = [{"type": "tool-call", "id": c, "name": "t", "arguments": "{}"} for c in call_ids]
        message = {
            "id": f"m{len(self.events)}",
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        return self.add(
            "assistant/message",
            {"turn": turn, "step": step, "message": message},
            surfaceOp="append",
        )

    def started(self, call_id: str, step: int = 1, turn: int = 1) -> Log:
        return self.add(
            "tool/call",
            {"turn": turn, "step": step, "callId": call_id, "name": "t", "arguments": "{}"},
        )

    def result(self, call_id: str, step: int = 1, turn: int = 1) -> Log:
        message = {
            "id": f"r{len(self.events)}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": []}],
        }
        return self.add(
            "tool/result", {"turn": turn, "step": step, "message": message}, surfaceOp="append"
        )


def kinds(closers: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in closers]


def test_empty_log_or_ended_turn_needs_nothing() -> None:
    assert interrupted_turn_closers([]) == []
    log = Log().turn().step().calls("a").result("a").end_step().end_turn()
    assert interrupted_turn_closers(log.events) == []


def test_open_turn_without_step() -> None:
    closers = interrupted_turn_closers(Log().turn(3).events)
    assert closers == [
        {
            "type": "turn/end",
            "seq": 1,
            "time": 1000,
            "data": {"turn": 3, "reason": {"kind": "interrupted"}},
        }
    ]
    assert list(closers[0]) == ["type", "seq", "time", "data"]


def test_open_step_without_pending_call() -> None:
    closers = interrupted_turn_closers(Log().turn().step(2).events)
    assert kinds(closers) == ["step/end", "turn/end"]
    assert closers[0]["data"] == {"turn": 1, "step": 2}
    assert [c["seq"] for c in closers] == [2, 3]
    assert {c["time"] for c in closers} == {1001}


def test_answered_calls_and_calls_of_ended_steps_or_turns_get_nothing() -> None:
    log = Log().turn(1).step(1).calls("old").end_step(1).end_turn(1)
    log.turn(2).step(1, turn=2).calls("x", turn=2).result("x", turn=2)
    log.end_step(1, turn=2).step(2, turn=2).calls("ended", step=2, turn=2).end_step(2, turn=2)
    assert kinds(interrupted_turn_closers(log.events)) == ["turn/end"]


def test_several_pending_calls_one_result_each_in_order() -> None:
    log = Log().turn().step().calls("a", "b", "c").started("b").started("a")
    closers = interrupted_turn_closers(log.events)
    assert kinds(closers) == ["tool/result", "tool/result", "tool/result", "step/end", "turn/end"]
    a, b, c = closers[:3]
    assert [x["data"]["message"]["source"]["callId"] for x in (a, b, c)] == ["a", "b", "c"]
    assert a["sourceEventSeqs"] == [4]
    assert b["sourceEventSeqs"] == [3]
    assert "sourceEventSeqs" not in c
    assert a["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert c["data"]["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert c["data"]["message"]["content"][0]["content"][0]["text"] == TOOL_NOT_STARTED_TEXT
    assert a["data"]["message"]["content"][0]["content"][0]["text"] == TOOL_OUTCOME_UNKNOWN_TEXT
    assert [x["data"]["message"]["id"] for x in (a, b, c)] == [
        "interrupted-tool-result-a-5",
        "interrupted-tool-result-b-6",
        "interrupted-tool-result-c-7",
    ]
    assert {x["time"] for x in closers} == {1004}


def test_not_started_closer_exact_json() -> None:
    closers = interrupted_turn_closers(Log().turn().step().calls("k").events)
    assert dumps(closers[0]) == (
        '{"type":"tool/result","seq":3,"time":1002,"data":{"turn":1,"step":1,"message":'
        '{"id":"interrupted-tool-result-k-3","role":"user","source":{"kind":"tool","callId":"k"},'
        '"content":[{"type":"tool-result","toolCallId":"k","isError":true,"content":[{"type":'
        '"text","text":"The tool call was interrupted before the Harness recorded it as started. '
        'Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":'
        '"TOOL_NOT_STARTED"}},"surfaceOp":"append"}'
    )


def test_orphan_tool_call_is_ignored() -> None:
    closers = interrupted_turn_closers(Log().turn().step().started("ghost").events)
    assert kinds(closers) == ["step/end", "turn/end"]


def test_pending_call_keeps_its_message_step() -> None:
    log = Log().turn().step(4).calls("a", step=4)
    closers = interrupted_turn_closers(log.events)
    assert closers[0]["data"]["step"] == 4


def test_turn_start_clears_a_previous_unclosed_turn() -> None:
    log = Log().turn(1).step(1).calls("lost").turn(2)
    assert kinds(interrupted_turn_closers(log.events)) == ["turn/end"]
    assert interrupted_turn_closers(log.events)[0]["data"]["turn"] == 2


def test_fixture_closers_are_byte_identical(outcome_unknown_log: Any) -> None:
    events = outcome_unknown_log.events
    closers = interrupted_turn_closers(events[:5])
    assert [dumps(c) for c in closers] == outcome_unknown_log.lines[6:9]
    assert interrupted_turn_closers(events) == []


def test_pure_does_not_touch_input() -> None:
    log = Log().turn().step().calls("a").started("a")
    before = dumps(log.events)
    interrupted_turn_closers(log.events)
    assert dumps(log.events) == before


_actions = st.lists(
    st.sampled_from(["turn", "end_turn", "step", "end_step", "call", "started", "result"]),
    max_size=40,
)


def _random_log(actions: list[str], picks: list[int]) -> list[dict[str, Any]]:
    log = Log()
    turn = step = 0
    call_ids: list[str] = []
    for index, action in enumerate(actions):
        pick = picks[index % len(picks)] if picks else 0
        if action == "turn":
            turn += 1
            log.turn(turn)
        elif action == "end_turn":
            log.end_turn(turn)
        elif action == "step":
            step += 1
            log.step(step, turn)
        elif action == "end_step":
            log.end_step(step, turn)
        elif action == "call":
            ids = [f"c{len(call_ids) + i}" for i in range(pick % 3 + 1)]
            call_ids.extend(ids)
            log.calls(*ids, step=step, turn=turn)
        elif call_ids:
            call_id = call_ids[pick % len(call_ids)]
            (log.started if action == "started" else log.result)(call_id, step, turn)
    return log.events


@settings(max_examples=300)
@given(_actions, st.lists(st.integers(0, 100), max_size=10))
def test_closers_are_idempotent_and_balance_the_log(actions: list[str], picks: list[int]) -> None:
    events = _random_log(actions, picks)
    closers = interrupted_turn_closers(events)
    repaired = events + closers
    assert interrupted_turn_closers(repaired) == []
    assert [e["seq"] for e in repaired] == list(range(len(repaired)))
    if closers:
        assert closers[-1]["type"] == "turn/end"
        assert closers[-1]["data"]["reason"] == {"kind": "interrupted"}
        assert all(c["time"] == events[-1]["time"] for c in closers)
    # Balanced: every turn/start is followed by its turn/end, every open step is closed.
    open_turn = open_step = False
    for event in repaired:
        if event["type"] == "turn/start":
            open_turn, open_step = True, False
        elif event["type"] == "turn/end":
            open_turn = open_step = False
        elif event["type"] == "step/start":
            open_step = True
        elif event["type"] == "step/end":
            open_step = False
    assert not open_turn
    assert not open_step or not closers
    # Closer results answer distinct calls that no earlier result answered.
    answered = {
        e["data"]["message"]["source"]["callId"] for e in events if e["type"] == "tool/result"
    }
    closed = [
        c["data"]["message"]["source"]["callId"] for c in closers if c["type"] == "tool/result"
    ]
    assert len(closed) == len(set(closed))
    assert not answered & set(closed)
