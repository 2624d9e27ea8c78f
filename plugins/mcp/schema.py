"""MCP input schemas translated into the tools service's JSON Schema subset (see docs/mcp.md).

MCP servers declare full JSON Schema; the tools service validates arguments against a subset
(`plugins/tools/schema.py`). `to_subset(schema)` keeps what the subset means the same way,
rewrites what it can say differently, and *relaxes* the rest: a dropped keyword only ever lets
more arguments through, and the server still validates them itself.

- kept: `type`, `properties`, `required`, boolean `additionalProperties`, `items` (one schema),
  scalar `enum`/`const`, `oneOf` and the annotations (`title`, `description`, `default`, ...);
- rewritten: local `$ref`s are inlined (a cycle or an unknown target becomes `{}`); a `type`
  list becomes a `oneOf` of single types; an `anyOf` whose branches have pairwise disjoint types
  becomes a `oneOf`; `allOf` branches are merged (a keyword set twice keeps the first);
- relaxed (dropped): everything else, e.g. `minLength`, `pattern`, `minimum`, `minItems`,
  `not`, `if`, schema-valued `additionalProperties`, tuple `items`, non-scalar `enum`, an
  `anyOf` that cannot be a `oneOf`, and a `oneOf` whose branches lost constraints and no longer
  have disjoint types (exactly-one-of would then reject valid arguments). Nesting deeper than
  `MAX_DEPTH` is relaxed to `{}`.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from plugins.tools.schema import ANNOTATIONS

__all__ = ["MAX_DEPTH", "to_subset"]

MAX_DEPTH: Final = 64
_TYPES: Final = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SILENT: Final = frozenset({"$defs", "definitions"})


def to_subset(schema: Any) -> tuple[dict[str, Any], list[str]]:
    """The subset schema for an MCP `inputSchema` and what was relaxed (`"<key>" at <path>`)."""
    translator = _Translator(schema)
    return translator.node(schema, "", 0), translator.relaxed


def _disjoint(branches: list[dict[str, Any]]) -> bool:
    """True if every branch has one `type` and no two branches can match the same value."""
    seen: set[str] = set()
    for branch in branches:
        kind = branch.get("type")
        if not isinstance(kind, str) or kind in seen:
            return False
        if {kind, *seen} >= {"integer", "number"}:
            return False
        seen.add(kind)
    return True


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


class _Translator:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.relaxed: list[str] = []
        self._refs: list[str] = []
        #: Keywords relaxed at the node being built (nested nodes keep their own).
        self._dropped: set[str] = set()

    def relax(self, keyword: str, at: str) -> None:
        self.relaxed.append(f'"{keyword}" at {at or "/"}')
        self._dropped.add(keyword)

    def node(self, schema: Any, at: str, depth: int) -> dict[str, Any]:
        if schema is True:
            return {}
        if not isinstance(schema, dict):
            self.relax("false" if schema is False else "non-object schema", at)
            return {}
        if depth > MAX_DEPTH:
            self.relax("nesting", at)
            return {}
        outer, self._dropped = self._dropped, set()
        try:
            out = self.build(schema, at, depth)
            if out.get("additionalProperties") is False and "properties" in self._dropped:
                # A property definition was lost: closing the object would reject its name.
                del out["additionalProperties"]
                self.relax("additionalProperties", f"{at}/additionalProperties")
            return out
        finally:
            self._dropped = outer

    def build(self, schema: dict[str, Any], at: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "$ref" in schema:
            out = self.ref(schema["$ref"], at, depth)
        for key, value in schema.items():
            where = f"{at}/{key}"
            if key == "$ref" or key in _SILENT:
                continue
            if key in ANNOTATIONS:
                out.setdefault(key, copy.deepcopy(value))
            elif key in out and key not in ("oneOf", "type"):
                self.relax(key, where)  # set by the $ref target already: keep the target's
            elif key == "type":
                self.type(out, value, where)
            elif key == "properties" and isinstance(value, dict):
                out["properties"] = {
                    name: self.node(sub, f"{where}/{name}", depth + 1)
                    for name, sub in value.items()
                }
            elif key == "required" and isinstance(value, list):
                if all(isinstance(name, str) for name in value):
                    out["required"] = list(value)
                else:
                    self.relax(key, where)
            elif key == "additionalProperties" and isinstance(value, bool):
                out[key] = value
            elif key == "items" and isinstance(value, dict | bool):
                if value is not True:
                    out["items"] = self.node(value, where, depth + 1)
            elif key in ("enum", "const"):
                values = value if key == "enum" else [value]
                if key == "enum" and not isinstance(value, list):
                    self.relax(key, where)
                elif all(_is_scalar(v) for v in values):
                    out[key] = copy.deepcopy(value)
                else:
                    self.relax(key, where)
            elif key in ("oneOf", "anyOf") and isinstance(value, list) and value:
                self.choice(out, key, value, where, depth)
            elif key == "allOf" and isinstance(value, list):
                for index, branch in enumerate(value):
                    self.merge(out, self.node(branch, f"{where}/{index}", depth + 1), where)
            else:
                self.relax(key, where)
        return out

    def ref(self, ref: Any, at: str, depth: int) -> dict[str, Any]:
        where = f"{at}/$ref"
        if not isinstance(ref, str) or not ref.startswith("#") or ref in self._refs:
            self.relax("$ref", where)
            return {}
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                self.relax("$ref", where)
                return {}
        self._refs.append(ref)
        try:
            return self.node(target, where, depth + 1)
        finally:
            self._refs.pop()

    def type(self, out: dict[str, Any], value: Any, where: str) -> None:
        if isinstance(value, str) and value in _TYPES:
            out["type"] = value
            return
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v in _TYPES for v in value)
        ):
            self.relax("type", where)
            return
        kinds = list(dict.fromkeys(value))
        if "number" in kinds and "integer" in kinds:
            kinds.remove("integer")  # "number" already accepts every integer
        if len(kinds) == 1:
            out["type"] = kinds[0]
        elif "oneOf" in out:
            self.relax("type", where)
        else:
            out["oneOf"] = [{"type": kind} for kind in kinds]

    def choice(
        self, out: dict[str, Any], key: str, value: list[Any], where: str, depth: int
    ) -> None:
        before = len(self.relaxed)
        branches = [
            self.node(branch, f"{where}/{index}", depth + 1) for index, branch in enumerate(value)
        ]
        exact = len(self.relaxed) == before
        if len(branches) == 1:
            self.merge(out, branches[0], where)
        elif "oneOf" in out:
            self.relax(key, where)
        elif _disjoint(branches) or (key == "oneOf" and exact):
            out["oneOf"] = branches
        else:
            self.relax(key, where)

    def merge(self, out: dict[str, Any], branch: dict[str, Any], where: str) -> None:
        for key, value in branch.items():
            if key not in out:
                out[key] = value
            elif key not in ANNOTATIONS and out[key] != value:
                self.relax(key, where)
