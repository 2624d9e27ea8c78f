"""`@tool` schemas: each signature against a hand-written expected `parameters` schema.

Every expected schema is also checked against the subset (`unsupported_keywords`), and each tool
must pass `Tool.check()`, the registration check of the tools service.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import date, datetime
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import BaseModel, ConfigDict, Field

from framework import AbortController
from plugins.tools import Tool, ToolExecution, ToolExecutionInput, tool
from plugins.tools.schema import unsupported_keywords, violations
from plugins.tools.subset import SchemaTranslationError, to_subset


def obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """The root object every `@tool` declares: closed, with `required` only when non-empty."""
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        out["required"] = required
    return out


class Point(BaseModel):
    x: int
    y: int = 0


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Window:
    start: str
    days: int = 7


class Cat(BaseModel):
    kind: Literal["cat"]
    indoor: bool


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: Annotated[str, Field(description="Shown to people.")]


POINT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
    "required": ["x"],
}


async def s01_string(path: str) -> str:
    """Read."""
    return path


async def s02_defaults(count: int = 3, ratio: float = 0.5, flag: bool = False) -> None:
    """Defaults."""


async def s03_list(tags: list[str], scores: list[float] | None = None) -> None:
    """Lists."""


async def s04_literal(mode: Literal["fast", "slow"] = "fast", only: Literal["x"] = "x") -> None:
    """Literals."""


async def s05_optional(name: str | None = None, age: int | None = ...) -> None:  # type: ignore[assignment]
    """Optional with and without a default."""


async def s06_annotated(
    query: Annotated[str, Field(description="What to look for.")],
    limit: Annotated[int, Field(ge=1, le=50)] = 10,
) -> None:
    """Annotated fields; constraints move into the description."""


async def s07_docstring(path: str, limit: int = 100) -> None:
    """Read a file from the workspace.

    Longer explanation that is not part of the description.

    Args:
        path: The file, relative to the workspace.
        limit (int): How many bytes to read
            at most.

    Returns:
        The text.
    """


async def s08_model(origin: Point, target: Point | None = None) -> None:
    """Models are inlined, even when used twice."""


async def s09_list_of_models(points: list[Point] = []) -> None:  # noqa: B006
    """A list of models."""


async def s10_enum(color: Color = Color.RED) -> None:
    """An Enum class."""


async def s11_dataclass(window: Window) -> None:
    """A dataclass parameter."""


async def s12_exec(path: str, exec: ToolExecution) -> None:
    """The ToolExecution parameter is not part of the schema."""


async def s13_union(value: int | str, number: int | float = 0) -> None:
    """Unions of different types; int | float is a number."""


async def s14_discriminated(pet: Annotated[Cat | Dog, Field(discriminator="kind")]) -> None:
    """A discriminated union of models."""


async def s15_dict_and_any(meta: dict[str, int], extra: Any = None) -> None:
    """A typed dict loosens to an object; Any is unconstrained."""


async def s16_datetime_and_tuple(at: datetime, pair: tuple[int, int] = (0, 0)) -> None:
    """Formats are annotations; a homogeneous tuple becomes items."""


async def s17_no_parameters() -> None:
    """No parameters at all."""


async def s18_strict_model_and_literal_union(
    tag: Strict, level: Literal["low"] | Literal["high"] | None = None
) -> None:
    """A closed model; a union of literals merges into one enum."""


async def s19_keyword_only(
    *, text: str, pattern: Annotated[str, Field(pattern="^a")] = "a"
) -> None:
    """Keyword-only parameters; a pattern is described."""


async def s20_alias(
    source: Annotated[str, Field(alias="from", description="Where it starts.")],
) -> None:
    """An alias is the JSON name."""


async def s21_field_defaults(
    size: Annotated[int, Field(default=3)],
    names: Annotated[list[str], Field(default_factory=list)],
) -> None:
    """Defaults given by Field inside Annotated, none in the signature."""


CASES: list[tuple[Any, dict[str, Any]]] = [
    (s01_string, obj({"path": {"type": "string"}}, ["path"])),
    (
        s02_defaults,
        obj(
            {
                "count": {"type": "integer", "default": 3},
                "ratio": {"type": "number", "default": 0.5},
                "flag": {"type": "boolean", "default": False},
            }
        ),
    ),
    (
        s03_list,
        obj(
            {
                "tags": {"type": "array", "items": {"type": "string"}},
                "scores": {
                    "oneOf": [{"type": "array", "items": {"type": "number"}}, {"type": "null"}],
                    "default": None,
                },
            },
            ["tags"],
        ),
    ),
    (
        s04_literal,
        obj(
            {
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "only": {"type": "string", "const": "x", "default": "x"},
            }
        ),
    ),
    (
        s05_optional,
        obj(
            {
                "name": {"oneOf": [{"type": "string"}, {"type": "null"}], "default": None},
                "age": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
            },
            ["age"],
        ),
    ),
    (
        s06_annotated,
        obj(
            {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {
                    "type": "integer",
                    "default": 10,
                    "description": "minimum: 1, maximum: 50",
                },
            },
            ["query"],
        ),
    ),
    (
        s07_docstring,
        obj(
            {
                "path": {"type": "string", "description": "The file, relative to the workspace."},
                "limit": {
                    "type": "integer",
                    "default": 100,
                    "description": "How many bytes to read at most.",
                },
            },
            ["path"],
        ),
    ),
    (
        s08_model,
        obj(
            {"origin": POINT, "target": {"oneOf": [POINT, {"type": "null"}], "default": None}},
            ["origin"],
        ),
    ),
    (s09_list_of_models, obj({"points": {"type": "array", "items": POINT, "default": []}})),
    (s10_enum, obj({"color": {"type": "string", "enum": ["red", "blue"], "default": "red"}})),
    (
        s11_dataclass,
        obj(
            {
                "window": {
                    "type": "object",
                    "properties": {
                        "start": {"type": "string"},
                        "days": {"type": "integer", "default": 7},
                    },
                    "required": ["start"],
                    # a dataclass takes the arguments model's closed config
                    "additionalProperties": False,
                }
            },
            ["window"],
        ),
    ),
    (s12_exec, obj({"path": {"type": "string"}}, ["path"])),
    (
        s13_union,
        obj(
            {
                "value": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                "number": {"type": "number", "default": 0},
            },
            ["value"],
        ),
    ),
    (
        s14_discriminated,
        obj(
            {
                "pet": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "const": "cat"},
                                "indoor": {"type": "boolean"},
                            },
                            "required": ["kind", "indoor"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string", "const": "dog"},
                                "barks": {"type": "integer"},
                            },
                            "required": ["kind", "barks"],
                        },
                    ]
                }
            },
            ["pet"],
        ),
    ),
    (s15_dict_and_any, obj({"meta": {"type": "object"}, "extra": {"default": None}}, ["meta"])),
    (
        s16_datetime_and_tuple,
        obj(
            {
                "at": {"type": "string", "format": "date-time"},
                "pair": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "default": [0, 0],
                    "description": "minItems: 2, maxItems: 2",
                },
            },
            ["at"],
        ),
    ),
    (s17_no_parameters, obj({})),
    (
        s18_strict_model_and_literal_union,
        obj(
            {
                "tag": {
                    "type": "object",
                    "properties": {"label": {"type": "string", "description": "Shown to people."}},
                    "required": ["label"],
                    "additionalProperties": False,
                },
                "level": {
                    "oneOf": [{"type": "string", "enum": ["low", "high"]}, {"type": "null"}],
                    "default": None,
                },
            },
            ["tag"],
        ),
    ),
    (
        s19_keyword_only,
        obj(
            {
                "text": {"type": "string"},
                "pattern": {"type": "string", "default": "a", "description": 'pattern: "^a"'},
            },
            ["text"],
        ),
    ),
    (
        s20_alias,
        obj({"from": {"type": "string", "description": "Where it starts."}}, ["from"]),
    ),
    (
        s21_field_defaults,
        obj(
            {
                "size": {"type": "integer", "default": 3},
                "names": {"type": "array", "items": {"type": "string"}},
            }
        ),
    ),
]


@pytest.mark.parametrize(("fn", "expected"), CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_schema_matches_the_hand_written_expectation(fn: Any, expected: dict[str, Any]) -> None:
    assert unsupported_keywords(expected) == []
    made = tool(fn)
    assert isinstance(made, Tool)
    assert made.parameters == expected
    made.check()


def test_at_least_fifteen_signatures_are_pinned() -> None:
    assert len(CASES) >= 15


async def u_numbers(value: int | float, maybe: int | None = None) -> None:
    """Numbers."""


async def u_dates(when: date | datetime) -> None:
    """Two string formats."""


async def u_pets(pet: Cat | Dog) -> None:
    """Models told apart by a Literal field, without an explicit discriminator."""


async def u_mixed(flag: Literal["on", 1, None] | list[int]) -> None:
    """A mixed-type Literal beside a list."""


LOOSENED: list[tuple[Any, list[dict[str, Any]]]] = [
    (
        u_numbers,
        [{"value": 3}, {"value": 3.5}, {"value": 1, "maybe": None}, {"value": 1, "maybe": 2}],
    ),
    (u_dates, [{"when": "2026-01-02"}, {"when": "2026-01-02T03:04:05"}]),
    (u_pets, [{"pet": {"kind": "cat", "indoor": True}}, {"pet": {"kind": "dog", "barks": 3}}]),
    (u_mixed, [{"flag": "on"}, {"flag": 1}, {"flag": None}, {"flag": [1, 2]}]),
]


@pytest.mark.parametrize(("fn", "values"), LOOSENED, ids=[fn.__name__ for fn, _ in LOOSENED])
def test_the_declared_schema_accepts_what_pydantic_accepts(
    fn: Any, values: list[dict[str, Any]]
) -> None:
    made = tool(fn)
    for value in values:
        assert violations(value, made.parameters, "arguments") == [], value
        # and pydantic does accept it: the body runs (it returns None)
        call = ToolExecutionInput("c", fn.__name__, value, AbortController().signal)
        assert anyio.run(made.execute, value, ToolExecution(call, value)) is None


def test_translation_refuses_what_it_cannot_inline() -> None:
    with pytest.raises(SchemaTranslationError, match='unresolvable reference "#/\\$defs/X" at #'):
        to_subset({"$ref": "#/$defs/X"})
    with pytest.raises(SchemaTranslationError, match='recursive type "N" at #/items cannot'):
        to_subset(
            {"$defs": {"N": {"type": "array", "items": {"$ref": "#/$defs/N"}}}, "$ref": "#/$defs/N"}
        )
