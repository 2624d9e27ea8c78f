"""The JSON Schema subset: registration-time refusal and the exact violation texts."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.tools.schema import unsupported_keywords, violations

OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "annotations are fine"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "mode": {"enum": ["r", "w", 1]},
        "kind": {"const": "file"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "number"}]},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_valid_value_has_no_violations() -> None:
    value = {
        "path": "a",
        "count": 2.0,
        "ratio": 1,
        "flag": False,
        "nothing": None,
        "mode": 1.0,
        "kind": "file",
        "tags": ["x"],
        "nested": {"x": 1},
        "either": "s",
    }
    assert violations(value, OBJECT, "arguments") == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x", ['"arguments" must be an object']),
        ({}, ['missing required property "arguments.path"']),
        (
            {"path": "a", "extra": 1},
            ['"arguments.extra" is not a declared property (additionalProperties: false)'],
        ),
        ({"path": 1}, ['"arguments.path" must be a string']),
        ({"path": "a", "count": 1.5}, ['"arguments.count" must be an integer']),
        ({"path": "a", "count": True}, ['"arguments.count" must be an integer']),
        ({"path": "a", "ratio": "1"}, ['"arguments.ratio" must be a number']),
        ({"path": "a", "flag": 0}, ['"arguments.flag" must be a boolean']),
        ({"path": "a", "nothing": 0}, ['"arguments.nothing" must be null']),
        ({"path": "a", "tags": "x"}, ['"arguments.tags" must be an array']),
        ({"path": "a", "tags": ["x", 2]}, ['"arguments.tags[1]" must be a string']),
        ({"path": "a", "mode": "x"}, ['"arguments.mode" must be one of ["r","w",1]']),
        ({"path": "a", "mode": True}, ['"arguments.mode" must be one of ["r","w",1]']),
        ({"path": "a", "kind": "dir"}, ['"arguments.kind" must be "file"']),
        (
            {"path": "a", "nested": {"y": 1}},
            [
                'missing required property "arguments.nested.x"',
                '"arguments.nested.y" is not a declared property (additionalProperties: false)',
            ],
        ),
        (
            {"path": "a", "either": 3},
            ['"arguments.either" must match exactly one oneOf branch (matched 2)'],
        ),
        (
            {"path": "a", "either": None},
            ['"arguments.either" must match exactly one oneOf branch (matched 0)'],
        ),
    ],
)
def test_violation_texts(value: Any, expected: list[str]) -> None:
    assert violations(value, OBJECT, "arguments") == expected


def test_empty_schema_accepts_anything() -> None:
    assert violations({"a": [1, None]}, {}, "arguments") == []
    assert violations(None, {"type": "null"}, "value") == []


def test_subset_accepts_supported_keywords() -> None:
    assert unsupported_keywords(OBJECT) == []
    assert unsupported_keywords({}) == []


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "object", "patternProperties": {}},
            'keyword "patternProperties" at #/patternProperties',
        ),
        ({"anyOf": [{}]}, 'keyword "anyOf" at #/anyOf'),
        ({"type": ["string", "null"]}, 'type ["string","null"] at #/type'),
        ({"additionalProperties": {"type": "string"}}, "non-boolean additionalProperties"),
        ({"enum": [{"a": 1}]}, "enum that is not a list of scalars"),
        ({"const": [1]}, "non-scalar const"),
        (
            {"properties": {"a": {"minLength": 1}}},
            'keyword "minLength" at #/properties/a/minLength',
        ),
        ({"items": {"$ref": "#"}}, 'keyword "$ref" at #/items/$ref'),
        ({"oneOf": []}, "non-list oneOf"),
        ({"required": "a"}, "required that is not a list of strings"),
        (True, "schema at # must be an object"),
    ],
)
def test_subset_refuses_the_rest(schema: Any, problem: str) -> None:
    problems = unsupported_keywords(schema)
    assert len(problems) == 1
    assert problem in problems[0]
