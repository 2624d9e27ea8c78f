"""`@tool` behaviour through the real tools service: arguments, `exec`, results, errors."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from framework import AbortController
from plugins.session.jsonutil import dumps
from plugins.tools import Tool, ToolArgsError, ToolExecution, ToolExecutionInput, tool
from plugins.tools.docstrings import parse_docstring


class Point(BaseModel):
    x: Annotated[int, Field(ge=0)]
    y: int = 0


class Node(BaseModel):
    children: list[Node] = []


@dataclasses.dataclass
class Stats:
    count: int
    at: datetime


def invalid(*violations: str) -> dict[str, Any]:
    message = "invalid arguments: " + "; ".join(violations)
    return {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {message}"}],
        "error": {"message": message, "info": {"name": "ToolArgsError", "code": "INVALID_ARGS"}},
    }


def call_of(name: str, arguments: Any, **extra: Any) -> ToolExecutionInput:
    return ToolExecutionInput("call-1", name, arguments, AbortController().signal, **extra)


def standalone_exec(arguments: Any) -> ToolExecution:
    return ToolExecution(call_of("t", arguments), arguments)


@pytest.mark.anyio
async def test_typed_arguments_reach_the_function_and_the_value_is_json(tools_root: Any) -> None:
    seen: dict[str, Any] = {}

    @tool
    async def measure(origin: Point, labels: list[str], mode: Literal["a", "b"] = "a") -> Stats:
        """Measure from a point."""
        seen.update(origin=origin, labels=labels, mode=mode)
        return Stats(count=len(labels), at=datetime(2026, 1, 2, 3, 4, 5))

    async with tools_root() as root:
        root.tools.register(measure)
        result = await root.tools.execute(call_of("measure", {"origin": {"x": 2}, "labels": ["p"]}))
    assert seen == {"origin": Point(x=2, y=0), "labels": ["p"], "mode": "a"}
    assert isinstance(seen["origin"], Point)
    assert result.to_json() == {
        "isError": False,
        "content": [{"type": "text", "text": '{"count":1,"at":"2026-01-02T03:04:05"}'}],
        "value": {"count": 1, "at": "2026-01-02T03:04:05"},
    }


@pytest.mark.anyio
async def test_models_and_plain_values_become_the_result_value(tools_root: Any) -> None:
    @tool
    async def point() -> Point:
        """A model."""
        return Point(x=1, y=2)

    @tool
    async def greet(name: str) -> str:
        """A string."""
        return f"hello {name}"

    async with tools_root() as root:
        root.tools.register(point)
        root.tools.register(greet)
        model = await root.tools.execute(call_of("point", {}))
        text = await root.tools.execute(call_of("greet", {"name": "ann"}))
    assert model.value == {"x": 1, "y": 2}
    assert text.value == "hello ann"
    assert text.content == [{"type": "text", "text": "hello ann"}]


@pytest.mark.anyio
async def test_defaults_reach_the_function(tools_root: Any) -> None:
    @tool
    async def page(
        size: Annotated[int, Field(default=3)],
        names: Annotated[list[str], Field(default_factory=list)],
        start: int = 1,
    ) -> list[Any]:
        """Defaults from the signature and from Field."""
        return [size, names, start]

    async with tools_root() as root:
        root.tools.register(page)
        result = await root.tools.execute(call_of("page", {}))
    assert result.value == [3, [], 1]


@pytest.mark.anyio
async def test_the_exec_parameter_receives_the_call(tools_root: Any) -> None:
    received: list[ToolExecution] = []

    @tool
    async def charge(amount: int, exec: ToolExecution) -> str:
        """Charge once per call."""
        received.append(exec)
        return exec.idempotency_key

    async with tools_root() as root:
        root.tools.register(charge)
        result = await root.tools.execute(
            call_of("charge", {"amount": 5}, idempotency_key="s1:1:1:call-1")
        )
    assert [e.call_id for e in received] == ["call-1"]
    assert result.value == "s1:1:1:call-1"
    assert "exec" not in charge.parameters["properties"]


@pytest.mark.anyio
async def test_pydantic_violations_are_invalid_args_results(tools_root: Any) -> None:
    bodies: list[str] = []

    @tool
    async def place(
        points: list[Point],
        when: datetime,
        value: Annotated[int, Field(ge=0)] | str = 0,
    ) -> None:
        """Place points."""
        bodies.append("ran")

    async with tools_root() as root:
        root.tools.register(place)
        constrained = await root.tools.execute(
            call_of("place", {"points": [{"x": 1}, {"x": -1}], "when": "soon"})
        )
        union = await root.tools.execute(
            call_of("place", {"points": [], "when": "2026-01-01T00:00:00", "value": -3})
        )
        subset = await root.tools.execute(call_of("place", {"points": "no"}))
    assert bodies == []
    assert constrained.to_json() == invalid(
        '"arguments.points[1].x" must be greater than or equal to 0',
        '"arguments.when" must be a valid datetime or date, input is too short',
    )
    # pydantic tries each union member; its member tags are not path segments
    assert union.to_json() == invalid(
        '"arguments.value" must be greater than or equal to 0',
        '"arguments.value" must be a valid string',
    )
    # the pipeline's own subset check runs first, with its own texts
    assert subset.to_json() == invalid(
        'missing required property "arguments.when"', '"arguments.points" must be an array'
    )


@pytest.mark.anyio
async def test_missing_and_undeclared_arguments_read_like_the_subset_check() -> None:
    @tool
    async def pick(origin: Point) -> None:
        """Pick."""

    with pytest.raises(ToolArgsError) as caught:
        await pick.execute({"origin": {"y": 1, "z": 2}, "other": 1}, standalone_exec({}))
    assert caught.value.code == "INVALID_ARGS"
    assert str(caught.value) == (
        'invalid arguments: missing required property "arguments.origin.x"; '
        '"arguments.other" is not a declared property (additionalProperties: false)'
    )


@pytest.mark.anyio
async def test_a_non_json_return_value_fails_the_call(tools_root: Any) -> None:
    @tool
    async def leak() -> Any:
        """Returns something that is not JSON."""
        return object()

    async with tools_root() as root:
        root.tools.register(leak)
        result = await root.tools.execute(call_of("leak", {}))
    assert result.is_error
    assert result.error is not None
    assert result.error.message.startswith('tool "leak" returned a value that is not JSON')


@pytest.mark.anyio
async def test_registered_through_a_plugin_it_leaves_with_the_plugin(tools_root: Any) -> None:
    @tool(name="lookup", description="Look a word up.", read_only=True)
    async def find(word: str) -> str:
        """Ignored: description= wins."""
        return word

    async with tools_root() as root:

        def plugin(ctx: Any, config: Any) -> None:
            ctx.tools.register(find)

        fiber = root.plugin(plugin, inject=["tools"])
        await fiber
        assert root.tools.schemas() == [
            {
                "name": "lookup",
                "description": "Look a word up.",
                "parameters": {
                    "type": "object",
                    "properties": {"word": {"type": "string"}},
                    "required": ["word"],
                    "additionalProperties": False,
                },
            }
        ]
        assert root.tools.execution_mode("lookup", {"word": "a"}) == "parallel"
        dumps(root.tools.schemas())  # what a provider receives is plain JSON
        await fiber.dispose()
        assert root.tools.get("lookup") is None


def test_options_set_the_tool_fields() -> None:
    @tool(timeout_ms=250, read_only=True)
    async def slow() -> None:
        """Slow."""

    @tool
    async def plain() -> None:
        """Plain."""

    @tool(read_only=True, concurrency_safe=False)
    async def serial() -> None:
        """Read-only but one call at a time."""

    @tool(concurrency_safe=True)
    async def parallel() -> None:
        """Writes, but calls may overlap."""

    assert isinstance(slow, Tool)
    assert (slow.name, slow.timeout_ms, slow.read_only, slow.is_concurrency_safe) == (
        "slow",
        250,
        True,
        True,  # follows read_only
    )
    assert (plain.timeout_ms, plain.read_only, plain.is_concurrency_safe) == (None, False, False)
    assert (serial.read_only, serial.is_concurrency_safe) == (True, False)
    assert (parallel.read_only, parallel.is_concurrency_safe) == (False, True)


@pytest.mark.anyio
async def test_the_timeout_policy_reads_timeout_ms(tools_root: Any) -> None:
    import anyio

    import plugins.tool_timeout_policy

    @tool(timeout_ms=20)
    async def nap(exec: ToolExecution) -> str:
        """Sleep until aborted."""
        await exec.signal.wait()
        return "woke"

    async with tools_root() as root:
        await root.plugin(plugins.tool_timeout_policy)
        root.tools.register(nap)
        with anyio.fail_after(5):
            result = await root.tools.execute(call_of("nap", {}))
    assert result.error is not None
    assert result.error.info == {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}


def _sync(x: int) -> int:
    """Not async."""
    return x


async def _untyped(x) -> None:  # type: ignore[no-untyped-def]
    """Untyped."""


async def _variadic(*names: str) -> None:
    """Variadic."""


async def _keywords(**names: str) -> None:
    """Variadic keywords."""


async def _positional(x: int, /) -> None:
    """Positional-only."""


async def _undocumented(x: int) -> None:
    pass


async def _recursive(tree: Node) -> None:
    """A recursive model."""


class A(BaseModel):
    a: int = 0


class B(BaseModel):
    b: int = 0


async def _ambiguous(either: A | B) -> None:
    """Two models that can both match {}."""


class Opaque:
    """Not a type pydantic knows."""


async def _opaque(thing: Opaque) -> None:
    """An arbitrary class."""


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_sync, "@tool needs an async function (async def), got <function _sync"),
        (_untyped, '@tool _untyped: parameter "x" needs a type annotation'),
        (_variadic, '@tool _variadic: parameter "names" must be a plain or keyword-only'),
        (_keywords, '@tool _keywords: parameter "names" must be a plain or keyword-only'),
        (_positional, '@tool _positional: parameter "x" must be a plain or keyword-only'),
        (_undocumented, "@tool _undocumented: give the tool a description"),
        (
            _recursive,
            '@tool _recursive: the recursive type "Node" at '
            "#/properties/tree/properties/children/items cannot be inlined",
        ),
        (_ambiguous, "@tool _ambiguous: the object alternatives at #/properties/either can both"),
        (
            _opaque,
            '@tool _opaque: parameter "thing" has a type pydantic cannot handle: Unable to '
            "generate pydantic-core schema for <class",
        ),
    ],
    ids=lambda value: getattr(value, "__name__", "message"),
)
def test_functions_that_cannot_be_tools_are_refused(fn: Any, message: str) -> None:
    with pytest.raises(TypeError) as caught:
        tool(fn)
    assert str(caught.value).startswith(message)


def test_what_registration_refuses_is_refused_at_decoration() -> None:
    async def run_code() -> None:
        """Shadows the reserved name."""

    async def slow() -> None:
        """A bad timeout."""

    with pytest.raises(ValueError, match='tool name "run_code" is reserved'):
        tool(run_code)
    with pytest.raises(TypeError, match='tool "slow" timeoutMs must be a positive finite number'):
        tool(timeout_ms=0)(slow)


def test_unresolvable_hints_are_refused() -> None:
    async def broken(x: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Broken."""

    with pytest.raises(TypeError, match="cannot resolve its type hints: name 'Missing'"):
        tool(broken)


def test_docstring_summary_and_args() -> None:
    doc = parse_docstring(
        """Fetch a page
        over HTTP.

        Details here.

        Arguments:
            url (str): The address.
            retries: How often to try
                again.

            timeout: Seconds.

        Raises:
            error: not a parameter.
        """
    )
    assert doc.summary == "Fetch a page over HTTP."
    assert doc.params == {
        "url": "The address.",
        "retries": "How often to try again.",
        "timeout": "Seconds.",
    }
    assert parse_docstring(None).summary == ""
    assert parse_docstring("Args:\n    x: only args.").summary == ""
