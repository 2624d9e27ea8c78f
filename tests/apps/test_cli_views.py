"""The `dsh run` views on stream items: the lines a person reads for results the turn's
stream yields."""

from __future__ import annotations

import io

from rich.console import Console

from apps.cli.console import Consoles
from apps.cli.views import HumanView, json_line
from plugins.agent import ToolCall, ToolResult
from plugins.session.repair import TOOL_NOT_STARTED_ERROR, TOOL_OUTCOME_UNKNOWN_ERROR


def result(call_id: str, name: str, error: dict[str, str] | None, text: str = "x") -> ToolResult:
    content = [{"type": "text", "text": text}]
    return ToolResult(call_id, name, error is not None, text, content, error, 1)


def shown(*items: ToolCall | ToolResult) -> list[str]:
    out, deco = io.StringIO(), io.StringIO()
    view = HumanView(Consoles(Console(file=out), Console(file=deco, width=1000)))
    for item in items:
        view.item(item)
    view.close()
    return deco.getvalue().splitlines()


def test_tool_results_show_their_repair_their_failure_or_their_text() -> None:
    lines = shown(
        ToolCall("c1", "write_file", {"path": "a"}, 1),
        result("c1", "write_file", dict(TOOL_OUTCOME_UNKNOWN_ERROR)),
        result("c2", "append_ledger", dict(TOOL_NOT_STARTED_ERROR)),
        result("c3", "read_file", {"name": "ToolArgsError", "code": "INVALID_ARGS"}, "bad\nargs"),
        result("c4", "", None, '{"ok":true}'),
    )
    assert lines == [
        '→ write_file {"path":"a"}',
        "⚠ write_file: outcome unknown",
        "⚠ append_ledger: not started",
        "✗ read_file: bad\\nargs",
        '✓ c4: {"ok":true}',
    ]


def test_a_result_of_an_unknown_call_has_no_name_in_json() -> None:
    line = json_line(result("c4", "", None, '{"ok":true}'))
    assert line == {
        "type": "tool-result",
        "callId": "c4",
        "name": None,
        "isError": False,
        "value": {"ok": True},
    }
