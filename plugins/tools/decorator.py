"""`@tool`: a `Tool` from a typed async function (see docs/writing-tools.md).

The parameters' type hints become a pydantic model; its JSON Schema, translated into the subset
(`subset.py`), is the tool's `parameters`. A call's arguments pass the pipeline's subset check,
then pydantic validation (failures are `INVALID_ARGS` results), then reach the function as
keyword arguments; a parameter annotated `ToolExecution` receives the call's `exec`. The return
value (a pydantic model, a dataclass or any JSON value) becomes the result's value.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .definition import Tool
from .docstrings import parse_docstring
from .errors import ToolArgsError
from .execution import ToolExecution
from .subset import SchemaTranslationError, to_subset

ToolFunction = Callable[..., Awaitable[Any]]

_SHOULD = re.compile(r"^\w+ should (.*)$", re.DOTALL)


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout_ms: float | None = None,
    concurrency_safe: bool | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    timeout_ms: float | None = None,
    concurrency_safe: bool | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn an async function into a `Tool`: `@tool` or `@tool(name=..., ...)`.

    `name` defaults to the function's name, `description` to its docstring's first paragraph;
    `read_only` marks a body without external side effects, `timeout_ms` is read by the timeout
    policy, `concurrency_safe` lets calls run in parallel (default: as `read_only`). Raises
    `TypeError` when the function cannot be a tool (not async, an untyped or variadic
    parameter, a type the tool schema cannot express), naming the function and the parameter.
    """

    def decorate(function: ToolFunction) -> Tool:
        return _build(
            function,
            name=name,
            description=description,
            read_only=read_only,
            timeout_ms=timeout_ms,
            concurrency_safe=concurrency_safe,
        )

    return decorate if fn is None else decorate(fn)


def _build(
    fn: ToolFunction,
    *,
    name: str | None,
    description: str | None,
    read_only: bool,
    timeout_ms: float | None,
    concurrency_safe: bool | None,
) -> Tool:
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@tool needs an async function (async def), got {fn!r}")
    label = getattr(fn, "__qualname__", repr(fn))
    tool_name = name if name is not None else fn.__name__
    doc = parse_docstring(fn.__doc__)
    text = description if description is not None else doc.summary
    if not text:
        raise TypeError(f"@tool {label}: give the tool a description (a docstring or description=)")
    arguments = _Arguments(fn, label, doc.params)
    try:
        parameters = to_subset(arguments.model.model_json_schema())
    except SchemaTranslationError as error:
        raise TypeError(f"@tool {label}: {error}") from None

    async def execute(args: Any, exec: ToolExecution) -> Any:
        kwargs = arguments.parse(args)
        if arguments.exec_param is not None:
            kwargs[arguments.exec_param] = exec
        return _jsonable(await fn(**kwargs), tool_name)

    made = Tool(
        name=tool_name,
        description=text,
        parameters=parameters,
        execute=execute,
        timeout_ms=timeout_ms,
        is_concurrency_safe=read_only if concurrency_safe is None else concurrency_safe,
        read_only=read_only,
    )
    made.check()  # what registration would refuse is refused where the tool is written
    return made


class _Arguments:
    """The pydantic model of a function's parameters and the mapping back to keyword names."""

    def __init__(self, fn: ToolFunction, label: str, docs: Mapping[str, str]) -> None:
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as error:
            raise TypeError(f"@tool {label}: cannot resolve its type hints: {error}") from None
        self.exec_param: str | None = None
        #: model field name → the function's parameter name
        self.names: dict[str, str] = {}
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            where = f'@tool {label}: parameter "{param.name}"'
            if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                raise TypeError(f"{where} must be a plain or keyword-only parameter")
            if param.name not in hints:
                raise TypeError(f"{where} needs a type annotation")
            hint = hints[param.name]
            if hint is ToolExecution:
                self.exec_param = param.name
                continue
            _check_type(hint, where)
            field_name = f"arg_{len(fields)}"
            self.names[field_name] = param.name
            annotated = _annotated(hint, param.name, docs.get(param.name))
            # without a default in the signature, a Field(default=...) in the hint still counts
            default = Field() if param.default is param.empty else param.default
            fields[field_name] = (annotated, default)
        self.model: type[BaseModel] = create_model(
            f"{getattr(fn, '__name__', 'tool')}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )

    def parse(self, args: Any) -> dict[str, Any]:
        """Validated keyword arguments; raises `ToolArgsError` with one violation per problem."""
        try:
            model = self.model.model_validate(args)
        except ValidationError as error:
            raise ToolArgsError(violations_of(error, args)) from None
        return {param: getattr(model, field) for field, param in self.names.items()}


def _check_type(hint: Any, where: str) -> None:
    """Refuse a type pydantic cannot validate or describe, naming the parameter."""
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]  # field metadata (an alias) only means something on a field
    try:
        TypeAdapter(hint).json_schema()
    except PydanticUserError as error:
        reason = str(error).strip().splitlines()[0]
        raise TypeError(f"{where} has a type pydantic cannot handle: {reason}") from None


def _annotated(hint: Any, name: str, doc: str | None) -> Any:
    """`hint` with the JSON name (the parameter's, unless an alias is given) and the docstring's
    description underneath its own `Field(...)` metadata, which wins."""
    base: Any = hint
    metadata: tuple[Any, ...] = ()
    if typing.get_origin(hint) is Annotated:
        base, *rest = typing.get_args(hint)
        metadata = tuple(rest)
    user_alias = next(
        (m.alias for m in metadata if isinstance(m, FieldInfo) and m.alias is not None), None
    )
    own = Field(alias=user_alias or name, description=doc)
    return Annotated[(base, own, *metadata)]


def violations_of(error: ValidationError, value: Any) -> list[str]:
    """Pydantic's errors as violation texts rooted at `arguments`, in the subset's wording."""
    texts: list[str] = []
    for item in error.errors(include_url=False):
        kind = item["type"]
        path = _path(item["loc"], value, keep_last=kind == "missing")
        if kind == "missing":
            text = f'missing required property "{path}"'
        elif kind == "extra_forbidden":
            text = f'"{path}" is not a declared property (additionalProperties: false)'
        else:
            should = _SHOULD.match(item["msg"])
            text = f'"{path}" must {should.group(1)}' if should else f'"{path}": {item["msg"]}'
        if text not in texts:
            texts.append(text)
    return texts


def _path(loc: tuple[int | str, ...], value: Any, *, keep_last: bool) -> str:
    """Follow `loc` through the value; segments the value lacks are pydantic's union tags."""
    path = "arguments"
    current = value
    for index, segment in enumerate(loc):
        last = index == len(loc) - 1
        if isinstance(segment, int) and isinstance(current, list) and segment < len(current):
            path += f"[{segment}]"
            current = current[segment]
        elif (
            isinstance(segment, str)
            and isinstance(current, dict)
            and (segment in current or (keep_last and last))
        ):
            path += f".{segment}"
            current = current.get(segment)
    return path


def _jsonable(value: Any, name: str) -> Any:
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as error:
        raise TypeError(f'tool "{name}" returned a value that is not JSON: {error}') from None
