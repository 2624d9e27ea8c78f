"""The event bus: ordered listeners per event name, scopes, and the five dispatch modes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio

from framework.errors import FrameworkError
from framework.hooks import Event

logger = logging.getLogger("framework.events")

Listener = Callable[..., Any]


class Scope:
    """A dispatch scope key (for example an agent); scopes nest through `parent`."""

    __slots__ = ("__weakref__", "lineage", "parent")

    def __init__(self, parent: Scope | None = None) -> None:
        self.parent = parent
        self.lineage: frozenset[Scope] = frozenset((self,)) | (
            parent.lineage if parent is not None else frozenset()
        )


class _Slot:
    """The listeners of one event name, with a cached snapshot for dispatch."""

    __slots__ = ("by_scope", "entries", "plain", "scoped")

    def __init__(self) -> None:
        self.entries: list[tuple[Listener, Scope | None]] = []
        self.plain: tuple[Listener, ...] = ()  # valid while no scoped listener is registered
        self.scoped = 0
        self.by_scope: dict[Scope | None, tuple[Listener, ...]] = {}  # snapshots per scope

    def refresh(self) -> None:
        self.scoped = sum(1 for _, scope in self.entries if scope is not None)
        self.plain = tuple(cb for cb, _ in self.entries)
        self.by_scope.clear()

    def current(self, scope: Scope | None) -> tuple[Listener, ...]:
        """The snapshot a dispatch made with `scope` calls now."""
        return self.plain if not self.scoped else self.for_scope(scope)

    def for_scope(self, scope: Scope | None) -> tuple[Listener, ...]:
        listeners = self.by_scope.get(scope)
        if listeners is None:
            lineage = scope.lineage if scope is not None else frozenset()
            listeners = tuple(cb for cb, own in self.entries if own is None or own in lineage)
            if len(self.by_scope) >= _SCOPE_CACHE:
                self.by_scope.clear()
            self.by_scope[scope] = listeners
        return listeners


_EMPTY: tuple[Listener, ...] = ()
_SCOPE_CACHE = 64  # bound on cached per-scope snapshots of one event name


class Bus:
    """One per root context. Dispatch snapshots listeners, so listeners may (un)register freely."""

    __slots__ = ("_slots", "spawn")

    def __init__(self, spawn: Callable[[str, Any], None]) -> None:
        self._slots: dict[str, _Slot] = {}
        self.spawn = spawn  # spawn(name, awaitable): awaits what a listener returned to `emit`

    def add(
        self, name: str, listener: Listener, scope: Scope | None, prepend: bool
    ) -> Callable[[], None]:
        """Register; returns the remover of exactly this registration."""
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = _Slot()
        entry = (listener, scope)
        if prepend:
            slot.entries.insert(0, entry)
        else:
            slot.entries.append(entry)
        slot.refresh()

        def remove() -> None:
            for i, existing in enumerate(slot.entries):
                if existing is entry:
                    del slot.entries[i]
                    slot.refresh()
                    return

        return remove

    def listeners(self, name: str, scope: Scope | None) -> tuple[Listener, ...]:
        """The listeners that see a dispatch of `name` made with `scope`, outermost first."""
        slot = self._slots.get(name)
        if slot is None:
            return _EMPTY
        if not slot.scoped:
            return slot.plain
        return slot.for_scope(scope)

    def snapshots(self, name: str, scope: Scope | None) -> Callable[[], tuple[Listener, ...]]:
        """A function returning `listeners(name, scope)` as of each call, in one Python call
        (the slot is made now, empty, if no listener was ever registered: slots are never
        removed, so the function stays current)."""
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = _Slot()
        return partial(slot.current, scope)

    def emit(self, name: str, args: tuple[Any, ...], scope: Scope | None) -> None:
        for listener in self.listeners(name, scope):
            try:
                result = listener(*args)
            except Exception:
                logger.exception('listener of "%s" failed', name)
                continue
            if result is not None and hasattr(result, "__await__"):
                self.spawn(name, result)

    async def parallel(self, name: str, args: tuple[Any, ...], scope: Scope | None) -> None:
        listeners = self.listeners(name, scope)
        if not listeners:
            return
        errors: list[Exception | None] = [None] * len(listeners)

        async def run(i: int, listener: Listener) -> None:
            try:
                result = listener(*args)
                if result is not None and hasattr(result, "__await__"):
                    await result
            except Exception as exc:
                errors[i] = exc

        async with anyio.create_task_group() as tg:
            for i, listener in enumerate(listeners):
                tg.start_soon(run, i, listener)
        failures = [exc for exc in errors if exc is not None]
        if len(failures) == 1:
            raise failures[0]
        if failures:
            raise ExceptionGroup(f'{len(failures)} listeners of "{name}" failed', failures)

    async def serial(
        self, name: str, args: tuple[Any, ...], scope: Scope | None, event: Event | None
    ) -> Any:
        for listener in self.listeners(name, scope):
            result = listener(*args)
            if result is not None and hasattr(result, "__await__"):
                result = await result
            if result is not None and result is not False:
                if event is not None:
                    event.check(result)
                return result
        return None

    def bail(
        self, name: str, args: tuple[Any, ...], scope: Scope | None, event: Event | None
    ) -> Any:
        for listener in self.listeners(name, scope):
            result = listener(*args)
            if result is not None and result is not False:
                if event is not None:
                    event.check(result)
                return result
        return None

    def waterfall(
        self,
        name: str,
        args: tuple[Any, ...],
        scope: Scope | None,
        inner: Callable[[], Any],
        event: Event | None,
    ) -> Any:
        listeners = self.listeners(name, scope)
        if not listeners:
            return inner()
        result = listeners[0](*args, Next(name, listeners, 0, args, inner, event))
        return result if event is None else event.checked(result)


class Next:
    """The one-shot `next` cursor handed to the waterfall listener at position `index`; with a
    declaration, what the following listener returns is checked against it."""

    __slots__ = ("_args", "_event", "_index", "_inner", "_listeners", "_name", "_used")

    def __init__(
        self,
        name: str,
        listeners: tuple[Listener, ...],
        index: int,
        args: tuple[Any, ...],
        inner: Callable[[], Any],
        event: Event | None,
    ) -> None:
        self._name = name
        self._event = event
        self._listeners = listeners
        self._index = index
        self._args = args
        self._inner = inner
        self._used = False

    def __call__(self) -> Any:
        if self._used:
            raise FrameworkError(f'next() of waterfall "{self._name}" called more than once')
        self._used = True
        index = self._index + 1
        listeners = self._listeners
        if index == len(listeners):
            return self._inner()
        args = self._args
        event = self._event
        result = listeners[index](
            *args, Next(self._name, listeners, index, args, self._inner, event)
        )
        return result if event is None else event.checked(result)
