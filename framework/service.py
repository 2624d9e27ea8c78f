"""Services: the `Service` base class, bound views, and isolation realms on dependency-injector."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar, Self

from dependency_injector import containers, providers

if TYPE_CHECKING:
    from framework.context import Context
    from framework.fiber import Fiber

#: Names that read as services on a Context: every name ever provided, injected or declared by a
#: Service subclass, plus the binding service keys of spec 01 §3 (known before their packages load).
service_names: set[str] = {"sessions", "llm", "tools", "sessionPersistence", "agents"}


class Service:
    """Base class of services; `ctx.<provide>` returns a view bound to the reading context.

    Keep mutable state in containers created in `__init__` and never rebind attributes after
    construction: views are shallow copies sharing the instance's attributes.
    """

    provide: ClassVar[str]
    ctx: Context  # the provider's context
    caller: Context  # the context that read this view (the provider's own for the instance)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("provide")
        if isinstance(name, str):
            service_names.add(name)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        self.ctx = ctx
        self.caller = ctx
        self.config = config
        self._views: weakref.WeakKeyDictionary[Context, Self] = weakref.WeakKeyDictionary()

    def bound(self, caller: Context) -> Self:
        """This service as seen from `caller` (a shallow copy, cached per context)."""
        if caller is self.caller:
            return self
        view = self._views.get(caller)
        if view is None:
            view = object.__new__(type(self))
            view.__dict__.update(self.__dict__)
            view.caller = caller
            self._views[caller] = view
        return view


class Entry:
    """One provided service: its value and the fiber that provided it."""

    __slots__ = ("fiber", "value")

    def __init__(self, value: object, fiber: Fiber) -> None:
        self.value = value
        self.fiber = fiber


class Realm:
    """An isolation realm: a `DynamicContainer` with one `providers.Object` per service."""

    __slots__ = ("container", "entries", "label")

    def __init__(self, label: str | None) -> None:
        self.label = label
        self.container = containers.DynamicContainer()
        self.entries: dict[str, Entry] = {}

    def add(self, name: str, entry: Entry) -> None:
        self.entries[name] = entry
        self.container.set_provider(name, providers.Object(entry.value))

    def remove(self, name: str, entry: Entry) -> None:
        if self.entries.get(name) is entry:
            del self.entries[name]
            delattr(self.container, name)

    def value(self, name: str) -> object:
        """The current value, honouring a dependency-injector `override()` of its provider."""
        return getattr(self.container, name)()
