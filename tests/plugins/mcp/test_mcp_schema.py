"""MCP input schemas translated into the tools service's subset: kept, rewritten, relaxed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.mcp.schema import MAX_DEPTH, to_subset
from plugins.tools.schema import unsupported_keywords, violations


def test_the_subset_passes_through_unchanged() -> None:
    schema = {
        "type": "object",
        "title": "args",
        "properties": {
            "a": {"type": "string", "description": "A", "enum": ["x", "y"]},
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
            "d": {"const": 3, "default": 3},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert to_subset(schema) == (schema, [])


def test_refs_are_inlined_and_type_lists_become_one_of() -> None:
    schema = {
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/Point", "description": "where"},
            "n": {"type": ["integer", "null"]},
            "m": {"type": ["integer", "number"]},
        },
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    out, relaxed = to_subset(schema)
    assert relaxed == []
    assert out["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "description": "where",
    }
    assert out["properties"]["n"] == {"oneOf": [{"type": "integer"}, {"type": "null"}]}
    assert out["properties"]["m"] == {"type": "number"}


def test_any_of_becomes_one_of_only_when_the_branches_are_disjoint() -> None:
    optional = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    out, relaxed = to_subset(optional)
    assert out == {"oneOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert relaxed == []
    overlapping = {"anyOf": [{"type": "string", "minLength": 2}, {"type": "string"}]}
    out, relaxed = to_subset(overlapping)
    assert out == {}
    assert relaxed == ['"minLength" at /anyOf/0/minLength', '"anyOf" at /anyOf']


def test_a_one_of_that_lost_constraints_is_dropped_unless_still_disjoint() -> None:
    ambiguous = {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string"}]}
    out, _ = to_subset(ambiguous)
    assert "oneOf" not in out  # "exactly one" would now reject every string
    disjoint = {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "integer"}]}
    out, _ = to_subset(disjoint)
    assert out == {"oneOf": [{"type": "string"}, {"type": "integer"}]}


def test_unsupported_keywords_are_relaxed_and_named() -> None:
    schema = {
        "type": "object",
        "properties": {
            "files": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 9},
            "extra": {"type": "object", "additionalProperties": {"type": "string"}},
            "tuple": {"type": "array", "items": [{"type": "string"}]},
            "bag": {"enum": [[1], [2]]},
        },
        "allOf": [{"required": ["files"]}],
        "not": {"required": ["bad"]},
    }
    out, relaxed = to_subset(schema)
    assert unsupported_keywords(out) == []
    assert out["required"] == ["files"]
    assert out["properties"]["files"] == {"type": "array", "items": {"type": "string"}}
    assert out["properties"]["extra"] == {"type": "object"}
    assert out["properties"]["tuple"] == {"type": "array"}
    assert out["properties"]["bag"] == {}
    assert relaxed == [
        '"minItems" at /properties/files/minItems',
        '"pattern" at /properties/name/pattern',
        '"maxLength" at /properties/name/maxLength',
        '"additionalProperties" at /properties/extra/additionalProperties',
        '"items" at /properties/tuple/items',
        '"enum" at /properties/bag/enum',
        '"not" at /not',
    ]


def test_a_closed_object_that_lost_a_property_definition_is_opened() -> None:
    schema = {
        "type": "object",
        "allOf": [{"properties": {"a": {"type": "string"}}}],
        "properties": {"b": {"type": "string"}},
        "additionalProperties": False,
    }
    out, relaxed = to_subset(schema)
    assert "additionalProperties" not in out
    assert '"additionalProperties" at /additionalProperties' in relaxed
    assert violations({"a": "x", "b": "y"}, out, "arguments") == []


def test_cycles_unknown_refs_and_deep_nesting_become_anything() -> None:
    recursive = {
        "type": "object",
        "properties": {"child": {"$ref": "#"}, "other": {"$ref": "#/$defs/Missing"}},
    }
    out, relaxed = to_subset(recursive)
    assert out["properties"]["child"]["properties"]["child"] == {}
    assert out["properties"]["other"] == {}
    assert '"$ref" at /properties/other/$ref' in relaxed
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(10 * MAX_DEPTH):
        deep = {"type": "array", "items": deep}
    out, relaxed = to_subset(deep)
    assert unsupported_keywords(out) == []
    assert any(entry.startswith('"nesting"') for entry in relaxed)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_KEYWORDS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "oneOf",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "minLength",
        "pattern",
        "not",
        "title",
        "default",
    ]
)
_TYPE = st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null"])


def _schemas() -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        value = st.one_of(
            inner,
            _TYPE,
            st.lists(_TYPE, max_size=3),
            st.lists(inner, max_size=3),
            st.dictionaries(st.text(max_size=3), inner, max_size=3),
            st.sampled_from(["#", "#/$defs/a", "#/properties/x", "#/nope"]),
            _JSON,
        )
        return st.dictionaries(_KEYWORDS, value, max_size=5)

    return st.recursive(st.booleans() | st.just({}), extend, max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_schemas())
def test_any_schema_translates_into_the_subset(schema: Any) -> None:
    out, _relaxed = to_subset(schema)
    assert unsupported_keywords(out) == []
