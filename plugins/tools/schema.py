"""The JSON Schema subset tools may declare and its validator (§5.4).

`unsupported_keywords(schema)` lists what falls outside the subset (checked at registration);
`violations(value, schema, root)` returns the exact violation texts, in document order.
"""

from __future__ import annotations

import math
from typing import Any

from plugins.session.jsonutil import dumps

#: Keywords that only annotate; they never constrain a value.
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)
_CONSTRAINTS = frozenset(
    {"type", "oneOf", "properties", "required", "additionalProperties", "items", "enum", "const"}
)
_TYPE_NOUNS = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "null": "null",
}


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | bool | int | float)


def unsupported_keywords(schema: object, at: str = "#") -> list[str]:
    """Return one problem per construct outside the subset (`<keyword> at <pointer>`); [] if ok."""
    if not isinstance(schema, dict):
        return [f"schema at {at} must be an object"]
    problems: list[str] = []
    for key, sub in schema.items():
        where = f"{at}/{key}"
        if key in ANNOTATIONS:
            continue
        if key not in _CONSTRAINTS:
            problems.append(f'keyword "{key}" at {where}')
        elif key == "type":
            if not isinstance(sub, str) or sub not in _TYPE_NOUNS:
                problems.append(f"type {dumps(sub)} at {where}")
        elif key == "oneOf":
            if not isinstance(sub, list) or not sub:
                problems.append(f"non-list oneOf at {where}")
            else:
                for index, branch in enumerate(sub):
                    problems += unsupported_keywords(branch, f"{where}/{index}")
        elif key == "properties":
            if not isinstance(sub, dict):
                problems.append(f"non-object properties at {where}")
            else:
                for name, prop in sub.items():
                    problems += unsupported_keywords(prop, f"{where}/{name}")
        elif key == "required":
            if not isinstance(sub, list) or not all(isinstance(n, str) for n in sub):
                problems.append(f"required that is not a list of strings at {where}")
        elif key == "additionalProperties":
            if not isinstance(sub, bool):
                problems.append(f"non-boolean additionalProperties at {where}")
        elif key == "items":
            problems += unsupported_keywords(sub, where)
        elif key == "enum":
            if not isinstance(sub, list) or not all(_is_scalar(v) for v in sub):
                problems.append(f"enum that is not a list of scalars at {where}")
        elif not _is_scalar(sub):  # const
            problems.append(f"non-scalar const at {where}")
    return problems


def _has_type(value: object, type_name: str) -> bool:
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if type_name == "integer":
        return isinstance(value, int) or (math.isfinite(value) and value.is_integer())
    return True  # number


def _scalar_equal(value: object, expected: object) -> bool:
    """Equality as JSON sees it: `true` is not `1`, `1` is `1.0`."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return isinstance(value, bool) and isinstance(expected, bool) and value == expected
    if isinstance(value, int | float) and isinstance(expected, int | float):
        return value == expected
    return type(value) is type(expected) and value == expected


def violations(value: object, schema: dict[str, Any], path: str) -> list[str]:
    """Return the violation texts of `value` against a subset `schema`, rooted at `path`."""
    out: list[str] = []
    _check(value, schema, path, out)
    return out


def _check(value: object, schema: dict[str, Any], path: str, out: list[str]) -> None:
    type_name = schema.get("type")
    if type_name is not None and not _has_type(value, type_name):
        out.append(f'"{path}" must be {_TYPE_NOUNS[type_name]}')
        return
    if "enum" in schema and not any(_scalar_equal(value, v) for v in schema["enum"]):
        out.append(f'"{path}" must be one of {dumps(schema["enum"])}')
    if "const" in schema and not _scalar_equal(value, schema["const"]):
        out.append(f'"{path}" must be {dumps(schema["const"])}')
    if "oneOf" in schema:
        matched = sum(1 for branch in schema["oneOf"] if not violations(value, branch, path))
        if matched != 1:
            out.append(f'"{path}" must match exactly one oneOf branch (matched {matched})')
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                out.append(f'missing required property "{path}.{name}"')
        closed = schema.get("additionalProperties") is False
        for name, item in value.items():
            if name in properties:
                _check(item, properties[name], f"{path}.{name}", out)
            elif closed:
                out.append(
                    f'"{path}.{name}" is not a declared property (additionalProperties: false)'
                )
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{index}]", out)
