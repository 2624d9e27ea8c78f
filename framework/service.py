"""Services: the `Service` base class, bound views, and isolation realms on dependency-injector."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

if TYPE_CHECKING:
    from dependency_injector.containers import DynamicContainer

    from framework.context import Context
    from framework.fiber import Fiber

T = TypeVar("T")

#: The service names Service subclasses declare (`provide`); with the names provided or
#: injected in a root, these read as services on its contexts (docs/concepts.md).
class_service_names: set[str] = set()


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
            class_service_names.add(name)
            from framework.context import install_service_attribute

            install_service_attribute(name)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        self.ctx = ctx
        self.caller = ctx
        self.config = config
        # A plain dict: each view holds its caller, so a weak key would outlive nothing
        # (docs/performance.md, "Eighth round: reading a service").
        self._views: dict[Context, Self] = {}

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


class ServiceKey(Generic[T]):
    """A typed name for a service that is not a `Service` subclass:
    `CLOCK = ServiceKey[Clock]("clock")`, then `ctx.service(CLOCK)` is a `Clock` to mypy."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


def key_name(key: type[Any] | ServiceKey[Any] | str) -> str:
    """The service name a key stands for: a `Service` subclass's `provide`, a key's `name`."""
    if isinstance(key, str):
        return key
    if isinstance(key, ServiceKey):
        return key.name
    name = getattr(key, "provide", None) if isinstance(key, type) else None
    if not isinstance(name, str):
        raise TypeError(f"{key!r} is not a service key (a Service subclass or a ServiceKey)")
    return name


class Entry:
    """One provided service: its value and the fiber that provided it."""

    __slots__ = ("fiber", "value")

    def __init__(self, value: object, fiber: Fiber) -> None:
        self.value = value
        self.fiber = fiber


class Realm:
    """An isolation realm: its services, and a `DynamicContainer` with one `providers.Object`
    per service.

    The container is built on first use (`container`, e.g. a test's `override()`), holding every
    service then provided: until then no provider can be overridden, so a service's value is its
    entry's. A command that never asks for a container never imports dependency-injector
    (docs/performance.md, "Start-up (P11)").
    """

    __slots__ = ("_container", "entries", "label")

    def __init__(self, label: str | None) -> None:
        self.label = label
        self._container: DynamicContainer | None = None
        self.entries: dict[str, Entry] = {}

    @property
    def container(self) -> DynamicContainer:
        """The realm's container (built now, with a provider per service, if not yet)."""
        if self._container is None:
            from dependency_injector import containers

            self._container = containers.DynamicContainer()
            for name, entry in self.entries.items():
                _set_provider(self._container, name, entry)
        return self._container

    def add(self, name: str, entry: Entry) -> None:
        self.entries[name] = entry
        if self._container is not None:
            _set_provider(self._container, name, entry)

    def remove(self, name: str, entry: Entry) -> None:
        if self.entries.get(name) is entry:
            del self.entries[name]
            if self._container is not None:
                delattr(self._container, name)

    def value(self, name: str) -> object:
        """The current value, honouring a dependency-injector `override()` of its provider."""
        if self._container is None:
            return self.entries[name].value
        return getattr(self._container, name)()


def _set_provider(container: DynamicContainer, name: str, entry: Entry) -> None:
    from dependency_injector import providers

    container.set_provider(name, providers.Object(entry.value))
