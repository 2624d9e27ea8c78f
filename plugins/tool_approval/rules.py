"""Which calls need approval: the manifest's rules, first match wins, then the read-only default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Action = Literal["allow", "deny", "ask"]


class Rule(BaseModel):
    """`{tool: <glob>, args?: {<key>: <glob or value>}, action, reason?}`.

    `tool` is a glob over the tool name (`mcp__git__*`); each `args` entry must match the call's
    top-level argument of that name: a string pattern is a glob over a string argument, any other
    value must be equal. `reason` is shown to the person (ask) or the model (deny).
    """

    model_config = ConfigDict(extra="forbid")

    #: A glob over the tool name (`write_file`, `mcp__git__*`).
    tool: str
    #: Top-level arguments the call must carry: a string is a glob over a string argument,
    #: any other value must be equal.
    args: dict[str, Any] | None = None
    #: `allow` (run), `deny` (refuse without asking) or `ask` (put a question to a person).
    action: Action
    #: Shown to the person with the question (`ask`) or to the model (`deny`).
    reason: str | None = None

    def matches(self, tool_name: str, arguments: Any) -> bool:
        """Whether this rule applies to a call of `tool_name` with `arguments`."""
        if not fnmatchcase(tool_name, self.tool):
            return False
        if not self.args:
            return True
        if not isinstance(arguments, Mapping):
            return False
        return all(
            key in arguments and _value_matches(arguments[key], expected)
            for key, expected in self.args.items()
        )


def _value_matches(value: Any, expected: Any) -> bool:
    if isinstance(expected, str):
        return isinstance(value, str) and fnmatchcase(value, expected)
    return bool(value == expected and type(value) is type(expected))


@dataclass(frozen=True)
class Verdict:
    """What the rules say about one call, and why."""

    action: Action
    reason: str | None


SIDE_EFFECTS_REASON = "the tool is not marked read-only"


def judge(rules: Sequence[Rule], tool_name: str, arguments: Any, read_only: bool) -> Verdict:
    """The first matching rule's action; else `allow` for read-only tools and `ask` otherwise."""
    for rule in rules:
        if rule.matches(tool_name, arguments):
            return Verdict(rule.action, rule.reason)
    if read_only:
        return Verdict("allow", None)
    return Verdict("ask", SIDE_EFFECTS_REASON)
