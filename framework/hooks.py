"""Typed event declarations: an event's name, dispatch kind, argument and result types.

The plugin that dispatches an event declares it once, as a module-level object
(docs/concepts.md, "Events"):

    EXECUTE: Waterfall[ToolExecution, Awaitable[ToolExecutionResult]] = Waterfall(
        "tools/execute", returns=ToolExecutionResult, awaits=True
    )

The type parameters are the listener's arguments, then (for `serial`, `bail` and `waterfall`)
what a listener returns; mypy checks `ctx.on(EXECUTE, fn)` and `ctx.waterfall(EXECUTE, ...)`
against them. `returns` is the same promise checked at run time, once, by the bus: a listener
result that is not an instance raises `ListenerResultError` (a `TypeError`) with `error`'s text.

Constructing a declaration registers its name for this process; `ctx.on("some/name", fn)` with a
name no declaration carries is logged once (see `Context.on` for when).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from typing import Any, ClassVar, Generic, Literal, TypeVar, TypeVarTuple

from framework.errors import FrameworkError

__all__ = [
    "Bail",
    "Emit",
    "Event",
    "Kind",
    "ListenerResultError",
    "Parallel",
    "Serial",
    "Waterfall",
    "declared",
]

Args = TypeVarTuple("Args")
R = TypeVar("R")

Kind = Literal["emit", "parallel", "serial", "bail", "waterfall"]

logger = logging.getLogger("framework.events")

_declared: dict[str, Event] = {}
_reported: set[str] = set()


def declared(name: str) -> Event | None:
    """The declaration carrying `name` (the latest one constructed), or None."""
    return _declared.get(name)


def report_undeclared(names: Iterable[str]) -> None:
    """Warn about each name that no declaration carries, once per name in this process."""
    for name in sorted(names):
        if name not in _declared and name not in _reported:
            _reported.add(name)
            logger.warning(
                'a listener was registered for event "%s", which no plugin declares '
                "(misspelled, or its plugin is not installed?)",
                name,
            )


class ListenerResultError(FrameworkError, TypeError):
    """A listener returned something its event's declaration does not allow."""

    code = "INVALID_LISTENER_RESULT"


class Event:
    """The untyped part of a declaration: `name`, `kind`, and the run-time result check.

    `returns`: the type(s) a listener result must be an instance of (None: unchecked).
    `awaits`: results are awaitables and the awaited value is what gets checked.
    `error`: the message of a failed check; `{got}` is replaced by the result's type name.
    """

    __slots__ = ("_error", "awaits", "name", "returns")

    kind: ClassVar[Kind]

    def __init__(
        self,
        name: str,
        *,
        returns: type | tuple[type, ...] | None = None,
        awaits: bool = False,
        error: str | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise TypeError(f"an event name must be a non-empty string, got {name!r}")
        self.name = name
        self.returns = returns
        self.awaits = awaits
        self._error = error if error is not None else _default_error(name, returns)
        _declared[name] = self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def check(self, value: object) -> None:
        """Raise `ListenerResultError` unless `value` is one of the declared result types."""
        if self.returns is not None and not isinstance(value, self.returns):
            raise ListenerResultError(self._error.replace("{got}", type(value).__name__))

    def checked(self, result: Any) -> Any:
        """`result` as a dispatch hands it on: checked now, or (`awaits`) once awaited."""
        if self.returns is None:
            return result
        if self.awaits:
            return self._awaited(result)
        self.check(result)
        return result

    async def _awaited(self, result: Any) -> Any:
        value = await result if inspect.isawaitable(result) else result
        self.check(value)
        return value


def _default_error(name: str, returns: type | tuple[type, ...] | None) -> str:
    types = returns if isinstance(returns, tuple) else (returns,) if returns is not None else ()
    names = " or ".join(t.__name__ for t in types)
    return f"{name} listener must return {names}, got {{got}}"


class Emit(Event, Generic[*Args]):
    """`ctx.emit`: synchronous fan-out to `listener(*args)`; results are ignored."""

    __slots__ = ()
    kind: ClassVar[Kind] = "emit"


class Parallel(Event, Generic[*Args]):
    """`await ctx.parallel`: every `listener(*args)` at once; failures are raised together."""

    __slots__ = ()
    kind: ClassVar[Kind] = "parallel"


class Serial(Event, Generic[*Args, R]):
    """`await ctx.serial`: `listener(*args)` in order (maybe async); the first result that is
    not None/False wins and is checked."""

    __slots__ = ()
    kind: ClassVar[Kind] = "serial"


class Bail(Event, Generic[*Args, R]):
    """`ctx.bail`: the synchronous `serial`."""

    __slots__ = ()
    kind: ClassVar[Kind] = "bail"


class Waterfall(Event, Generic[*Args, R]):
    """`ctx.waterfall`: middleware `listener(*args, next) -> R`; each listener's result is
    checked (awaited first when `awaits`)."""

    __slots__ = ()
    kind: ClassVar[Kind] = "waterfall"
