"""Pydantic's JSON Schema, translated into the subset tools declare (see `schema.py`).

The arguments of a `@tool` function are validated twice: first by the tools pipeline against the
declared (subset) schema, then by pydantic against the full types. So the translation may only
*loosen* what pydantic checks, never tighten it:

- `$defs`/`$ref` are inlined (a recursive type cannot be, and is refused);
- `anyOf`/`oneOf` become `oneOf` over branches of different JSON types (so exactly one matches):
  branches of one type merge (constants into one `enum`, `integer` into `number`, anything else
  into the bare type), object branches must differ in a required constant (a discriminator);
- constraints the subset lacks (`minimum`, `maxLength`, `pattern`, ...) move into the
  description, where the model still reads them; pydantic enforces them;
- `title`s are dropped; other keywords outside the subset (`discriminator`, `prefixItems`,
  a typed `additionalProperties`) are dropped.
"""

from __future__ import annotations

from typing import Any

from plugins.session.jsonutil import dumps

from .schema import ANNOTATIONS, unsupported_keywords

Schema = dict[str, Any]

#: Constraints outside the subset that the description carries for the model.
DESCRIBED = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
_KEPT = frozenset({"type", "required", "enum", "const"})
_NUMERIC = frozenset({"integer", "number"})


class SchemaTranslationError(TypeError):
    """A type whose JSON Schema has no faithful form in the subset."""


def to_subset(schema: Schema) -> Schema:
    """The subset form of a pydantic JSON Schema (raises `SchemaTranslationError`)."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    result = _Translator(defs).node(schema, "#", ())
    problems = unsupported_keywords(result)
    if problems:  # a translation bug, not a user error: say what slipped through
        raise SchemaTranslationError("; ".join(problems))
    return result


class _Translator:
    def __init__(self, defs: dict[str, Schema]) -> None:
        self.defs = defs

    def node(self, schema: Schema, at: str, seen: tuple[str, ...]) -> Schema:
        if "$ref" in schema:
            name = str(schema["$ref"]).removeprefix("#/$defs/")
            if name not in self.defs:
                raise SchemaTranslationError(f'unresolvable reference "{schema["$ref"]}" at {at}')
            if name in seen:
                raise SchemaTranslationError(
                    f'the recursive type "{name}" at {at} cannot be inlined into a tool schema'
                )
            target = self.node(self.defs[name], at, (*seen, name))
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            return {**target, **self.node(siblings, at, seen)}
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = {k: v for k, v in schema.items() if k not in (key, "discriminator")}
                branches = [
                    self.node(branch, f"{at}/{key}/{index}", seen)
                    for index, branch in enumerate(schema[key])
                ]
                return {**_union(branches, at), **self.node(rest, at, seen)}
        out: Schema = {}
        described = [f"{key}: {dumps(schema[key])}" for key in DESCRIBED if key in schema]
        for key, value in schema.items():
            if key == "title" or key == "$defs":
                continue
            if key in ANNOTATIONS or key in _KEPT:
                out[key] = value
            elif key == "properties":
                out[key] = {
                    name: self.node(sub, f"{at}/properties/{name}", seen)
                    for name, sub in value.items()
                }
            elif key == "items":
                out[key] = self.node(value, f"{at}/items", seen)
            elif key == "additionalProperties" and isinstance(value, bool):
                out[key] = value
            elif key == "prefixItems" and "items" not in schema:
                items = [self.node(sub, f"{at}/prefixItems", seen) for sub in value]
                if items and all(item == items[0] for item in items):
                    out["items"] = items[0]
        if described:
            note = ", ".join(described)
            text = out.get("description")
            out["description"] = f"{text} ({note})" if text else note
        return out


def _annotations_only(schema: Schema) -> bool:
    return all(key in ANNOTATIONS for key in schema)


def _values(schema: Schema) -> list[Any] | None:
    """The values a constant branch allows (`const` or `enum`), else None."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "object"


def _group(schema: Schema) -> str | None:
    """The JSON type family a branch belongs to (`integer` and `number` are one family)."""
    type_name = schema.get("type")
    if isinstance(type_name, str):
        return "number" if type_name in _NUMERIC else type_name
    values = _values(schema)
    if values:
        kinds = {_json_type(v) for v in values}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _union(branches: list[Schema], at: str) -> Schema:
    """Alternatives as a `oneOf` whose branches cannot both match (see the module docstring)."""
    split: list[Schema] = []
    for branch in branches:
        if _annotations_only(branch):
            return {}  # one branch accepts anything: so does the union
        values = _values(branch)
        if _group(branch) is None and values is not None:
            split.extend({"const": v} for v in values)  # a mixed-type enum: one per value
        elif _group(branch) is None:
            return {}
        else:
            split.append(branch)
    families: dict[str, list[Schema]] = {}
    for branch in split:
        group = _group(branch)
        assert group is not None
        families.setdefault(group, []).append(branch)
    merged: list[Schema] = []
    for group, members in families.items():
        schema = _merge(group, members, at)
        merged += schema["oneOf"] if list(schema) == ["oneOf"] else [schema]
    return merged[0] if len(merged) == 1 else {"oneOf": merged}


def _merge(group: str, members: list[Schema], at: str) -> Schema:
    """One schema standing for same-family branches."""
    if len(members) == 1:
        return members[0]
    types = {m.get("type") for m in members if "type" in m}
    integer_only = types <= {"integer"}
    constants = [_values(m) for m in members]
    if all(values is not None for values in constants):
        union: dict[str, Any] = {}
        for values in constants:
            assert values is not None
            union.update((dumps(v), v) for v in values)
        out: Schema = {"enum": list(union.values())}
        if len(types) == 1:
            out["type"] = types.pop()
        elif types:
            out["type"] = "integer" if integer_only else "number"
        return out
    if group == "object":
        for index, first in enumerate(members):
            for second in members[index + 1 :]:
                if not _objects_disjoint(first, second):
                    raise SchemaTranslationError(
                        f"the object alternatives at {at} can both match one value: give each "
                        "model a required field with a distinct Literal (a discriminator, e.g. "
                        'kind: Literal["a"])'
                    )
        return {"oneOf": members}
    if group == "number":
        return {"type": "integer" if integer_only else "number"}
    if group == "array":
        items = [m.get("items") for m in members]
        out = {"type": "array"}
        if all(item is not None and item == items[0] for item in items):
            out["items"] = items[0]
        return out
    return {"type": group}


def _objects_disjoint(first: Schema, second: Schema) -> bool:
    """True when some property required by both has constant values that never overlap."""
    shared = set(first.get("required", ())) & set(second.get("required", ()))
    for name in shared:
        a = _values(first.get("properties", {}).get(name, {}))
        b = _values(second.get("properties", {}).get(name, {}))
        if a is not None and b is not None and not any(v in b for v in a):
            return True
    return False
