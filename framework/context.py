"""The Context: plugin registration, services, effects and event dispatch as seen by one fiber.

Every context belongs to a fiber (the root context to the root fiber). `ctx.plugin()` creates a
child fiber with its own context and schedules its loading in the root's task group; whatever a
context registers (`effect`, `provide`, `on`, child plugins, registrations made through a bound
Service view) is undone when its fiber unloads or is disposed. Services resolve through the
realm of their name (see `framework.service`); events go through the root's single bus, filtered
by the context's scope.

Background work goes through `ctx.spawn` (fire-and-forget) and `ctx.start` (wait until the task
reports it has started): the task runs in the root's task group as an effect of the caller's
fiber, so disposing that fiber cancels it, and a failure is logged instead of reaching the root.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, Unpack, overload

import anyio
from anyio.abc import TaskGroup, TaskStatus

from framework.errors import FrameworkError, ServiceError
from framework.events import Listener, Scope
from framework.fiber import Disposer, Effect, Fiber, FiberState, Root, describe, disposers_of
from framework.hooks import Bail, Emit, Event, Parallel, Serial, Waterfall, declared
from framework.service import Entry, Realm, Service, ServiceKey, class_service_names, key_name
from framework.signal import _timer_group

if TYPE_CHECKING:
    from dependency_injector.containers import DynamicContainer

logger = logging.getLogger("framework")

EffectResult = Disposer | list[Disposer] | tuple[Disposer, ...] | None

S = TypeVar("S")
R = TypeVar("R")
Args = TypeVarTuple("Args")


class Context:
    """A plugin's view of the framework; the root one is `async with Context() as ctx:`."""

    __slots__ = (
        "__weakref__",
        "_base_dir",
        "_fiber",
        "_injected",
        "_realms",
        "_root",
        "_scope",
        "_token",
    )

    def __init__(self) -> None:
        root = Root()
        fiber = Fiber(root, None, None, None, "root", ())
        self._bind(root, fiber, {}, frozenset(), None, None)
        fiber.ctx = self
        self._token: Token[TaskGroup | None] | None = None

    def _bind(
        self,
        root: Root,
        fiber: Fiber,
        realms: dict[str, Realm],
        injected: frozenset[str],
        scope: Scope | None,
        base_dir: Path | None,
    ) -> None:
        self._root = root
        self._fiber = fiber
        self._realms = realms
        self._injected = injected
        self._scope = scope
        self._base_dir = base_dir

    def _derive(
        self,
        fiber: Fiber,
        realms: dict[str, Realm],
        injected: frozenset[str],
        scope: Scope | None,
        base_dir: Path | None,
    ) -> Context:
        ctx = object.__new__(Context)
        ctx._bind(self._root, fiber, realms, injected, scope, base_dir)
        return ctx

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Context:
        root = self._root
        if self._fiber.parent is not None or root.tg is not None:
            raise FrameworkError("only a root context can be entered, and only once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        root.tg = tg
        self._token = _timer_group.set(tg)
        self._fiber.state = FiberState.ACTIVE
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._root.tg
        assert tg is not None
        assert self._token is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._fiber.dispose()
        finally:
            _timer_group.reset(self._token)
            tg.cancel_scope.cancel()
        try:
            return await tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # The body's own exception propagates as itself, not wrapped by the root task group.
            if exc is not None and all(inner is exc for inner in group.exceptions):
                return False
            raise

    @property
    def fiber(self) -> Fiber:
        """The fiber this context belongs to (the root fiber for the root context)."""
        return self._fiber

    @property
    def scope(self) -> Scope | None:
        """The dispatch scope of this context (None: unscoped)."""
        return self._scope

    @property
    def base_dir(self) -> Path | None:
        """The folder a plugin resolves relative paths of its config against: the folder of the
        file that wrote its row's config (the manifest, or an overlay that inserted the row or
        patched its config); None when mounted from code."""
        return self._base_dir

    def plugin(
        self,
        plugin: Any,
        config: Any = None,
        *,
        inject: tuple[str, ...] | list[str] = (),
        isolate: Mapping[str, bool | str] | None = None,
        base_dir: Path | None = None,
    ) -> Fiber:
        """Register `plugin` as a child of this context's fiber; loading happens in the background.

        `inject` adds required services; `isolate` maps a service name to True (a private realm)
        or a label (a realm shared by every row with that label) for this fiber and its children.
        `base_dir` (default: this context's) is the plugin's `ctx.base_dir`.
        """
        name, declared = describe(plugin)
        required = tuple(dict.fromkeys((*declared, *inject)))
        parent = self._fiber
        parent.check_active()
        if self._root.tg is None:
            raise FrameworkError("enter the root context (async with Context()) before plugins")
        fiber = Fiber(self._root, parent, plugin, config, name, required)
        realms = self._realms
        if isolate:
            realms = dict(realms)
            for service, label in isolate.items():
                if label is False:
                    continue
                realms[service] = self._root.realm(None if label is True else str(label))
        fiber.ctx = self._derive(
            fiber,
            realms,
            self._injected.union(required),
            self._scope,
            self._base_dir if base_dir is None else base_dir,
        )
        parent._children.append(fiber)
        self._root.service_names.update(required)
        for service in required:
            install_service_attribute(service)
            self._root.dependents.setdefault(service, []).append(fiber)
        self._root.schedule(fiber)
        return fiber

    async def settle(self) -> None:
        """Wait until no fiber of this root is loading, unloading or scheduled to re-evaluate."""
        await self._root.settle()

    def scoped(self, scope: Scope) -> Context:
        """A context of the same fiber whose listeners and dispatches carry `scope`."""
        return self._derive(self._fiber, self._realms, self._injected, scope, self._base_dir)

    # -- effects -----------------------------------------------------------------------------

    @overload
    def effect(self, setup: Callable[[], Awaitable[EffectResult]]) -> Awaitable[Effect]: ...

    @overload
    def effect(self, setup: Callable[[], EffectResult]) -> Effect: ...

    def effect(self, setup: Callable[[], Any]) -> Effect | Awaitable[Effect]:
        """Run `setup()` now; what it returns (disposers, maybe awaited) becomes an effect.

        Returns the effect (awaitable when `setup` is async); calling it undoes the effect now,
        returning an awaitable when a disposer is async.
        """
        fiber = self._fiber
        if fiber.state in (FiberState.DISPOSED, FiberState.UNLOADING):
            raise FrameworkError("cannot create effect on inactive context")
        result = setup()
        if result is not None and hasattr(result, "__await__"):
            return self._effect_later(result)
        return fiber.add_effect(disposers_of(result))

    # -- background tasks --------------------------------------------------------------------

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> None:
        """Run `fn(*args)` in the background, in the root's task group; returns at once.

        The task is an effect of this context's fiber: disposing the fiber cancels it and waits
        until it has ended (leaving the root does too). An exception is logged with the plugin's
        name (`background task "<name>" of plugin "<plugin>" failed`) and never reaches the
        root. `name` (default: `fn`'s qualified name) labels the task. Raises FrameworkError on
        an inactive context or before the root is entered.
        """
        task = _Task(self, fn, args, name)
        try:
            task.group.start_soon(task.run, None, name=task.name)
        except RuntimeError:  # the root task group has closed
            task.drop()
            raise FrameworkError("cannot spawn a task: the root context has closed") from None

    async def start(
        self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> Any:
        """Like `spawn`, for a task that reports readiness: wait until it calls
        `task_status.started(value)` and return `value` (anyio `TaskGroup.start` semantics).

        `fn` is called as `fn(*args, task_status=status)`. An exception it raises before
        `started()` propagates here (not logged); a disposal of the fiber before `started()`
        raises FrameworkError here. After `started()` the task behaves as with `spawn`.
        """
        task = _Task(self, fn, args, name)
        try:
            return await task.group.start(task.run, name=task.name)
        except RuntimeError as error:
            if task.done.is_set():
                raise
            task.drop()  # the root task group has closed: the task never ran
            raise FrameworkError("cannot start a task: the root context has closed") from error

    async def _effect_later(self, pending: Awaitable[Any]) -> Effect:
        disposers = disposers_of(await pending)
        try:
            return self._fiber.add_effect(disposers)
        except FrameworkError:
            undo = Effect(self._fiber, disposers).undo()
            if undo is not None:
                await undo
            raise

    # -- services ----------------------------------------------------------------------------

    def provide(self, name: str, value: object) -> Effect:
        """Provide service `name` as an effect of this context's fiber (see docs/concepts.md)."""
        realm = self._realm(name)
        existing = realm.entries.get(name)
        if existing is not None:
            raise ServiceError(f'service "{name}" has been registered at {existing.fiber.name}')
        fiber = self._fiber
        root = self._root
        entry = Entry(value, fiber)
        record = (name, realm, entry)
        root.service_names.add(name)
        install_service_attribute(name)

        def setup() -> Callable[[], Awaitable[None]]:
            realm.add(name, entry)
            fiber._provided.append(record)
            if fiber.state is FiberState.ACTIVE:
                root.notify(name, realm)
            return withdraw

        async def withdraw() -> None:
            await fiber._unload_dependents(record)
            if record in fiber._provided:
                fiber._provided.remove(record)
            realm.remove(name, entry)
            root.notify(name, realm)

        return self.effect(setup)

    @overload
    def get(self, key: str) -> Any: ...

    @overload
    def get(self, key: type[S] | ServiceKey[S]) -> S | None: ...

    def get(self, key: type[Any] | ServiceKey[Any] | str) -> Any:
        """The service (a bound view for a Service) or None; does not require injection.

        `key` is a name, a `Service` subclass (`ctx.get(SessionStore)`) or a `ServiceKey`; the
        latter two type the result for mypy (not checked at run time: tests may substitute).
        """
        name = key_name(key)
        realm = self._realm(name)
        entry = realm.entries.get(name)
        if entry is None:
            return None
        if entry.fiber.state is FiberState.ACTIVE or self._fiber.within(entry.fiber):
            return self._view(realm, name)
        return None

    @overload
    def service(self, key: str) -> Any: ...

    @overload
    def service(self, key: type[S] | ServiceKey[S]) -> S: ...

    def service(self, key: type[Any] | ServiceKey[Any] | str) -> Any:
        """A service read with the rules of `ctx.<name>` (it must be injected here, and its
        provider active); `ctx.service(SessionStore)` is a `SessionStore` to mypy."""
        return self._read(key_name(key))

    def container_for(self, name: str) -> DynamicContainer:
        """The dependency-injector container of the realm where `name` resolves from here.

        Tests may substitute a service:
        `ctx.container_for("llm").llm.override(providers.Object(fake))`.
        """
        return self._realm(name).container

    if TYPE_CHECKING:
        # `ctx.<service>` is a class attribute installed per service name (see
        # `install_service_attribute`); to mypy, any attribute.
        def __getattr__(self, name: str) -> Any: ...

    def _read(self, name: str) -> Any:
        realm = self._realms.get(name) or self._root.default_realm
        entry = realm.entries.get(name)
        fiber = self._fiber
        injected = name in self._injected
        if entry is not None:
            if (
                fiber.parent is None
                or (
                    injected
                    and entry.fiber.state is FiberState.ACTIVE
                    and fiber.state is not FiberState.DISPOSED
                )
                # the provider (or its child) reading its own service
                or fiber.within(entry.fiber)
            ):
                value = realm.value(name)
                return value.bound(self) if isinstance(value, Service) else value
        elif fiber.parent is None:
            raise AttributeError(f'service "{name}" is not provided')
        if not injected:
            raise ServiceError(f'cannot get property "{name}" without inject')
        raise ServiceError(f'cannot get required service "{name}" in inactive context')

    def _realm(self, name: str) -> Realm:
        return self._realms.get(name) or self._root.default_realm

    def _view(self, realm: Realm, name: str) -> Any:
        value = realm.value(name)
        return value.bound(self) if isinstance(value, Service) else value

    # -- events ------------------------------------------------------------------------------

    @overload
    def on(
        self,
        event: Waterfall[*Args, R],
        listener: Callable[[Unpack[Args], Callable[[], R]], R],
        *,
        prepend: bool = False,
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event: Serial[*Args, R] | Bail[*Args, R],
        listener: Callable[[Unpack[Args]], Awaitable[R | None] | R | None],
        *,
        prepend: bool = False,
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event: Emit[*Args] | Parallel[*Args],
        listener: Callable[[Unpack[Args]], object],
        *,
        prepend: bool = False,
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event: str, listener: Listener, *, prepend: bool = False
    ) -> Callable[[], None]: ...

    def on(
        self, event: Event | str, listener: Listener, *, prepend: bool = False
    ) -> Callable[[], None]:
        """Listen to `event` (appended, or first with `prepend`); returns the remover.

        `event` is a declaration (typed: mypy checks the listener against it) or a plain name.
        A plain name that no declaration carries is logged once, when the root is next idle
        (no plugin loading): by then every mounted plugin has imported what it declares.
        """
        root = self._root
        if isinstance(event, Event):
            name = event.name
        else:
            name = event
            if declared(name) is None:
                root.check_event_name(name)
        bus = root.bus
        scope = self._scope
        effect = self.effect(lambda: bus.add(name, listener, scope, prepend))

        def off() -> None:
            effect()

        return off

    @overload
    def listeners(
        self, event: Waterfall[*Args, R]
    ) -> tuple[Callable[[Unpack[Args], Callable[[], R]], R], ...]: ...

    @overload
    def listeners(
        self, event: Serial[*Args, R] | Bail[*Args, R]
    ) -> tuple[Callable[[Unpack[Args]], Awaitable[R | None] | R | None], ...]: ...

    @overload
    def listeners(
        self, event: Emit[*Args] | Parallel[*Args]
    ) -> tuple[Callable[[Unpack[Args]], object], ...]: ...

    @overload
    def listeners(self, event: str) -> tuple[Listener, ...]: ...

    def listeners(self, event: Event | str) -> tuple[Listener, ...]:
        """A snapshot of the listeners a dispatch of `event` from this context calls, outermost
        first (for services that dispatch with their own policy; results are not checked)."""
        return self._root.bus.listeners(_name(event), self._scope)

    def listener_snapshots(self, event: Event | str) -> Callable[[], tuple[Listener, ...]]:
        """A function returning `listeners(event)` as of each call, at the cost of one Python
        call instead of three (for services that dispatch one event often with their own
        policy, such as `session/event` on every append)."""
        return self._root.bus.snapshots(_name(event), self._scope)

    def emit(self, event: Emit[*Args] | str, *args: *Args) -> None:
        """Call every listener synchronously; failures are logged, awaitables run in background."""
        self._root.bus.emit(_name(event), args, self._scope)

    async def parallel(self, event: Parallel[*Args] | str, *args: *Args) -> None:
        """Run every listener concurrently; raise one failure as itself, several as a group."""
        await self._root.bus.parallel(_name(event), args, self._scope)

    @overload
    async def serial(self, event: Serial[*Args, R], *args: *Args) -> R | None: ...

    @overload
    async def serial(self, event: str, *args: Any) -> Any: ...

    async def serial(self, event: Event | str, *args: object) -> Any:
        """Await listeners in order; return the first result that is not None and not False
        (checked against a declaration's `returns`)."""
        declaration = event if isinstance(event, Event) else None
        return await self._root.bus.serial(_name(event), args, self._scope, declaration)

    @overload
    def bail(self, event: Bail[*Args, R], *args: *Args) -> R | None: ...

    @overload
    def bail(self, event: str, *args: Any) -> Any: ...

    def bail(self, event: Event | str, *args: object) -> Any:
        """Synchronous `serial`."""
        declaration = event if isinstance(event, Event) else None
        return self._root.bus.bail(_name(event), args, self._scope, declaration)

    @overload
    def waterfall(self, event: Waterfall[*Args, R], *args: *Args, inner: Callable[[], R]) -> R: ...

    @overload
    def waterfall(self, event: str, *args: Any, inner: Callable[[], Any]) -> Any: ...

    def waterfall(self, event: Event | str, *args: object, inner: Callable[[], Any]) -> Any:
        """Middleware dispatch: the first listener is outermost, called `listener(*args, next)`;
        with a declaration, each listener's result is checked against its `returns`."""
        declaration = event if isinstance(event, Event) else None
        return self._root.bus.waterfall(_name(event), args, self._scope, inner, declaration)


class _ServiceAttribute:
    """`ctx.<name>` for a service name: the service read with the rules of `Context.service`
    if the name is a service of the context's root (provided or injected there, or a `Service`
    subclass's `provide`), else the error of a missing attribute (docs/performance.md,
    "Eighth round: reading a service")."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, ctx: Context | None, owner: type[Context]) -> Any:
        name = self.name
        if ctx is None:
            raise AttributeError(f"type object '{owner.__name__}' has no attribute '{name}'")
        if name in ctx._root.service_names or name in class_service_names:
            return ctx._read(name)
        raise AttributeError(f"'Context' object has no attribute '{name}'")

    def __set__(self, ctx: Context, value: object) -> None:
        raise AttributeError(f"'{type(ctx).__name__}' object has no attribute '{self.name}'")

    def __delete__(self, ctx: Context) -> None:
        raise AttributeError(f"'{type(ctx).__name__}' object has no attribute '{self.name}'")


def install_service_attribute(name: str) -> None:
    """Make `ctx.<name>` read service `name` (unless `_`-prefixed or already an attribute)."""
    if not name.startswith("_") and name not in Context.__dict__:
        setattr(Context, name, _ServiceAttribute(name))


for _declared in tuple(class_service_names):
    install_service_attribute(_declared)


def _name(event: Event | str) -> str:
    return event.name if isinstance(event, Event) else event


class _Status:
    """The `task_status` handed to a task run by `Context.start`: remembers `started()`."""

    __slots__ = ("_status", "started_")

    def __init__(self, status: TaskStatus[Any]) -> None:
        self._status = status
        self.started_ = False

    def started(self, value: Any = None) -> None:
        self._status.started(value)
        self.started_ = True


class _Task:
    """A background task of a fiber: its cancel scope and the effect that cancels it."""

    __slots__ = ("args", "done", "effect", "fiber", "fn", "group", "name", "scope", "task_id")

    def __init__(
        self,
        ctx: Context,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        name: str | None,
    ) -> None:
        group = ctx._root.tg
        fiber = ctx._fiber
        fiber.check_active()
        if group is None:
            raise FrameworkError("enter the root context (async with Context()) before tasks")
        self.group = group
        self.fiber = fiber
        self.fn = fn
        self.args = args
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.task_id: int | None = None
        self.effect = fiber.add_effect([self._stop])

    def _stop(self) -> Awaitable[None] | None:
        """The effect's disposer: cancel the task and wait until it has ended (not when the
        task itself is disposing its fiber: it ends once it leaves that disposal)."""
        if self.done.is_set():
            return None
        self.scope.cancel()
        if self.task_id == anyio.get_current_task().id:
            return None
        return self.done.wait()

    def drop(self) -> None:
        """Forget a task that never ran."""
        self.done.set()
        self.effect()

    async def run(self, task_status: TaskStatus[Any] | None = None) -> None:
        self.task_id = anyio.get_current_task().id
        status = None if task_status is None else _Status(task_status)
        call = self.fn if status is None else partial(self.fn, task_status=status)
        try:
            with self.scope:
                await call(*self.args)
            if status is not None and not status.started_ and self.scope.cancelled_caught:
                raise FrameworkError(
                    f'task "{self.name}" of plugin "{self.fiber.name}" was cancelled before it '
                    "started"
                )
        except Exception:
            if status is not None and not status.started_:
                raise  # start() re-raises it in its caller
            logger.exception(
                'background task "%s" of plugin "%s" failed', self.name, self.fiber.name
            )
        finally:
            self.done.set()
            self.effect()  # no longer an effect of the fiber (its disposer is a no-op now)
