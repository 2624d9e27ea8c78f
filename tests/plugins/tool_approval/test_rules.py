"""The rules: first match wins on a tool-name glob and optional argument matches; unmatched
tools are allowed when read-only and asked about otherwise."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from plugins.tool_approval import Config, Rule
from plugins.tool_approval.rules import SIDE_EFFECTS_REASON, Verdict, judge


def rules(*items: dict[str, object]) -> list[Rule]:
    return Config.model_validate({"rules": list(items)}).rules


def test_unmatched_tools_follow_the_read_only_marker() -> None:
    assert judge([], "read_file", {"path": "a"}, read_only=True) == Verdict("allow", None)
    assert judge([], "write_file", {"path": "a"}, read_only=False) == Verdict(
        "ask", SIDE_EFFECTS_REASON
    )


def test_first_matching_rule_wins_over_later_ones_and_the_default() -> None:
    chain = rules(
        {"tool": "mcp__git__*", "action": "deny", "reason": "no git here"},
        {"tool": "mcp__*", "action": "allow"},
        {"tool": "read_file", "action": "ask", "reason": "secrets live here"},
    )
    assert judge(chain, "mcp__git__push", {}, read_only=False) == Verdict("deny", "no git here")
    assert judge(chain, "mcp__web__fetch", {}, read_only=False) == Verdict("allow", None)
    assert judge(chain, "read_file", {}, read_only=True) == Verdict("ask", "secrets live here")
    assert judge(chain, "mcp_x", {}, read_only=False).action == "ask"


def test_argument_matches_glob_strings_and_compare_other_values() -> None:
    chain = rules(
        {"tool": "write_file", "args": {"path": "tmp/*"}, "action": "allow"},
        {"tool": "transfer", "args": {"amount": 0}, "action": "allow"},
        {"tool": "transfer", "args": {"dry_run": True}, "action": "allow"},
    )
    assert judge(chain, "write_file", {"path": "tmp/x.txt"}, read_only=False).action == "allow"
    assert judge(chain, "write_file", {"path": "src/x.py"}, read_only=False).action == "ask"
    assert judge(chain, "write_file", {}, read_only=False).action == "ask"
    assert judge(chain, "write_file", "not an object", read_only=False).action == "ask"
    assert judge(chain, "write_file", {"path": 3}, read_only=False).action == "ask"
    assert judge(chain, "transfer", {"amount": 0}, read_only=False).action == "allow"
    assert judge(chain, "transfer", {"amount": 5}, read_only=False).action == "ask"
    # `True == 1` in Python, but a rule for `1` must not allow `true`.
    assert judge(chain, "transfer", {"amount": False}, read_only=False).action == "ask"
    assert judge(chain, "transfer", {"dry_run": True}, read_only=False).action == "allow"


def test_a_rule_with_an_unknown_action_or_key_is_refused_at_boot() -> None:
    with pytest.raises(ValidationError, match="action"):
        rules({"tool": "x", "action": "maybe"})
    with pytest.raises(ValidationError, match="toool"):
        rules({"toool": "x", "action": "allow"})
    with pytest.raises(ValidationError, match="policy"):
        Config.model_validate({"policy": "sometimes"})
