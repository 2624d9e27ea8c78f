"""Fibers: a plugin's lifecycle (states, effects, injection) and the state shared by a root.

Transitions of one fiber are serialised by its lock and run in background tasks of the root's
task group. A fiber loads while every injected service exists and its provider is ACTIVE (and
not releasing); before a provider unloads, the dependents bound to its services are unloaded
back to PENDING, while the services are still readable. A service change re-evaluates its
dependents: PENDING ones load, ACTIVE ones bound to another provider reload, FAILED ones retry when
a provider they inject differs from the one their failed load was given.
Teardown order: dependents, then child fibers (last first), then effects (last first).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel, ValidationError

from framework.errors import ConfigError, FrameworkError, PluginError, validation_problems
from framework.events import Bus
from framework.hooks import report_undeclared
from framework.service import Entry, Realm, Service

if TYPE_CHECKING:
    from framework.context import Context

logger = logging.getLogger("framework")

Disposer = Callable[[], Any]


class FiberState(enum.Enum):
    """Lifecycle states of a fiber."""

    PENDING = "pending"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    DISPOSED = "disposed"
    UNLOADING = "unloading"


_BUSY = (FiberState.LOADING, FiberState.UNLOADING)
_INACTIVE = (FiberState.DISPOSED, FiberState.UNLOADING)


class Effect:
    """An undoable effect of a fiber; calling it undoes it now (await the result if not None)."""

    __slots__ = ("disposers", "fiber")

    def __init__(self, fiber: Fiber, disposers: list[Disposer]) -> None:
        self.fiber = fiber
        self.disposers = disposers

    def __call__(self) -> Awaitable[None] | None:
        effects = self.fiber._effects
        for i in range(len(effects) - 1, -1, -1):
            if effects[i] is self:
                del effects[i]
                break
        return self.undo()

    def undo(self) -> Awaitable[None] | None:
        """Run the disposers in reverse order; from the first async one on, return a coroutine."""
        disposers, self.disposers = self.disposers, []
        for i in range(len(disposers) - 1, -1, -1):
            try:
                result = disposers[i]()
            except Exception:
                logger.exception('disposer of plugin "%s" failed', self.fiber.name)
                continue
            if result is not None and hasattr(result, "__await__"):
                return self._finish(result, disposers[:i])
        return None

    async def _finish(self, pending: Awaitable[Any], rest: list[Disposer]) -> None:
        try:
            await pending
        except Exception:
            logger.exception('disposer of plugin "%s" failed', self.fiber.name)
        for disposer in reversed(rest):
            try:
                result = disposer()
                if result is not None and hasattr(result, "__await__"):
                    await result
            except Exception:
                logger.exception('disposer of plugin "%s" failed', self.fiber.name)


def disposers_of(result: object) -> list[Disposer]:
    """Normalise an effect setup's result (None, a disposer or a list of them)."""
    if result is None:
        return []
    if callable(result):
        return [result]
    if isinstance(result, list | tuple) and all(callable(d) for d in result):
        return list(result)
    raise TypeError(f"invalid effect {result!r}: expected a disposer or a list of disposers")


class Root:
    """State shared by every context of one root: task group, bus, realms, dependents."""

    def __init__(self) -> None:
        self.tg: TaskGroup | None = None
        self.bus = Bus(self.spawn)
        self.default_realm = Realm(None)
        self.labelled: dict[str, Realm] = {}
        self.dependents: dict[str, list[Fiber]] = {}
        self.busy = 0
        self._idle: anyio.Event | None = None
        self.service_names: set[str] = set()  # every name provided or injected in this root
        self._unchecked: set[str] = set()  # listened event names to check once idle

    def spawn(self, event: str, awaitable: Any) -> None:
        """Await what a listener of `event` returned to `emit`, in the root's task group.

        Failures are logged; once the root has closed, the awaitable is dropped (and closed).
        """

        async def contained() -> None:
            try:
                await awaitable
            except Exception:
                logger.exception('listener of "%s" failed', event)

        try:
            if self.tg is None:
                raise RuntimeError("not entered")
            self.tg.start_soon(contained)
        except RuntimeError:
            if hasattr(awaitable, "close"):
                awaitable.close()
            logger.error('listener of "%s": background work dropped, the root is closed', event)

    def realm(self, label: str | None) -> Realm:
        """A fresh private realm (None) or the shared realm of `label`."""
        if label is None:
            return Realm(None)
        realm = self.labelled.get(label)
        if realm is None:
            realm = self.labelled[label] = Realm(label)
        return realm

    def schedule(self, fiber: Fiber) -> None:
        """Re-evaluate `fiber` in the background (load, reload, unload as needed)."""
        assert self.tg is not None, "Context.plugin checks that the root is entered"
        fiber._pending += 1
        self.enter()
        self.tg.start_soon(fiber._refresh)

    def notify(self, name: str, realm: Realm) -> None:
        """Service `name` changed in `realm`: re-evaluate every fiber injecting it there."""
        for fiber in tuple(self.dependents.get(name, ())):
            if fiber.ctx._realm(name) is realm:
                self.schedule(fiber)

    def enter(self) -> None:
        self.busy += 1

    def leave(self) -> None:
        self.busy -= 1
        if not self.busy:
            if self._unchecked:
                names, self._unchecked = self._unchecked, set()
                report_undeclared(names)
            if self._idle is not None:
                self._idle.set()
                self._idle = None

    def check_event_name(self, name: str) -> None:
        """Warn if no declaration carries `name` once nothing is loading: plugins that are
        still loading may yet import the module that declares it."""
        if self.busy:
            self._unchecked.add(name)
        else:
            report_undeclared((name,))

    async def settle(self) -> None:
        while self.busy:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()


class Fiber:
    """The lifecycle of one registered plugin. `await fiber` waits until it has settled."""

    def __init__(
        self,
        root: Root,
        parent: Fiber | None,
        plugin: Any,
        config: Any,
        name: str,
        inject: tuple[str, ...],
    ) -> None:
        self.name = name
        self.plugin = plugin
        self.config = config
        self.inject = inject
        self.parent = parent
        self.state = FiberState.PENDING
        self.error: BaseException | None = None
        self.ctx: Context
        self._root = root
        self._effects: list[Effect] = []
        self._provided: list[tuple[str, Realm, Entry]] = []
        self._bound: dict[str, Entry] = {}
        #: The providers the last failed load was given: a retry needs another one.
        self._failed_with: dict[str, Entry] = {}
        self._lock = anyio.Lock()
        self._owner: int | None = None  # id of the task inside a transition of this fiber
        self._pending = 0
        self._waiter: anyio.Event | None = None
        self._disposing = False
        self._releasing = False  # unloading dependents: the services no longer satisfy injection
        self._children: list[Fiber] = []
        self._apply_scope: anyio.CancelScope | None = None

    def __repr__(self) -> str:
        return f"<Fiber {self.name!r} {self.state.name}>"

    def __await__(self) -> Generator[Any, None, None]:
        return self._settled().__await__()

    @property
    def settled(self) -> bool:
        """Not loading or unloading, and no re-evaluation scheduled."""
        return not self._pending and self.state not in _BUSY

    def waiting_for(self) -> list[str]:
        """Injected services that are missing or whose provider is not ACTIVE."""
        missing = []
        for name in self.inject:
            entry = self.ctx._realm(name).entries.get(name)
            if entry is None or entry.fiber.state is not FiberState.ACTIVE:
                missing.append(name)
        return missing

    async def dispose(self) -> None:
        """Undo every effect (children included) and end DISPOSED; later calls are no-ops.

        Called from inside this fiber's own transition (its apply or one of its disposers), it
        returns at once: a running apply is cancelled and the transition ends DISPOSED.
        """
        if self._disposing:
            return
        self._disposing = True
        if self.parent is not None and self in self.parent._children:
            self.parent._children.remove(self)
        if self._apply_scope is not None:
            self._apply_scope.cancel()
        if self._owner is not None and self._owner == anyio.get_current_task().id:
            return
        self._root.enter()
        try:
            with anyio.CancelScope(shield=True):  # a half-done teardown would leak registrations
                async with self._transition():
                    pass
        finally:
            self._root.leave()
            self._wake()

    @asynccontextmanager
    async def _transition(self) -> AsyncIterator[None]:
        """Hold the fiber's lock; on the way out, finish a disposal requested meanwhile."""
        async with self._lock:
            self._owner = anyio.get_current_task().id
            try:
                yield
                if self._disposing and self.state is not FiberState.DISPOSED:
                    await self._release()
                    self.state = FiberState.UNLOADING
                    await self._teardown()
                    self.state = FiberState.DISPOSED
                    self._bound = {}
                    for name in self.inject:
                        self._root.dependents[name].remove(self)
            finally:
                self._owner = None

    def within(self, other: Fiber) -> bool:
        """Whether this fiber is `other` or one of its descendants."""
        fiber: Fiber | None = self
        while fiber is not None:
            if fiber is other:
                return True
            fiber = fiber.parent
        return False

    def check_active(self) -> None:
        """Refuse new effects while DISPOSED or UNLOADING."""
        if self.state in _INACTIVE:
            raise FrameworkError("cannot create effect on inactive context")

    def add_effect(self, disposers: list[Disposer]) -> Effect:
        self.check_active()
        effect = Effect(self, disposers)
        self._effects.append(effect)
        return effect

    async def _settled(self) -> None:
        while not self.settled:
            if self._waiter is None:
                self._waiter = anyio.Event()
            await self._waiter.wait()
        if self.state is FiberState.FAILED and self.error is not None:
            raise self.error

    def _wake(self) -> None:
        if self._waiter is not None and self.settled:
            self._waiter.set()
            self._waiter = None

    def _ready(self) -> bool:
        for name in self.inject:
            entry = self.ctx._realm(name).entries.get(name)
            if entry is None or entry.fiber._releasing:
                return False
            if entry.fiber.state is not FiberState.ACTIVE:
                return False
        return True

    def _providers(self) -> dict[str, Entry]:
        """The entries `inject` would bind now (missing names left out)."""
        entries = {name: self.ctx._realm(name).entries.get(name) for name in self.inject}
        return {name: entry for name, entry in entries.items() if entry is not None}

    def _current(self) -> bool:
        return all(
            self.ctx._realm(name).entries.get(name) is entry for name, entry in self._bound.items()
        )

    async def _refresh(self) -> None:
        try:
            async with self._transition():
                if self._disposing:
                    return
                if self.state is FiberState.ACTIVE:
                    if self._ready() and self._current():
                        return
                    await self._unload()
                elif self.state is FiberState.FAILED:
                    if self._providers() == self._failed_with:
                        return  # nothing it injects changed since it failed: failing again
                    self.state = FiberState.PENDING
                    self.error = None
                if self._ready():
                    await self._load()
        finally:
            self._pending -= 1
            self._root.leave()
            self._wake()

    async def _load(self) -> None:
        self.state = FiberState.LOADING
        self.error = None
        self._releasing = False
        self._bound = {name: self.ctx._realm(name).entries[name] for name in self.inject}
        failure: Exception | None = None
        with anyio.CancelScope() as scope:
            self._apply_scope = scope
            try:
                await self._apply()
            except Exception as exc:
                failure = exc
        self._apply_scope = None
        if failure is None and not scope.cancelled_caught:
            self.state = FiberState.ACTIVE
            for name, realm, _entry in tuple(self._provided):
                self._root.notify(name, realm)
            return
        if failure is not None:
            if isinstance(failure, ConfigError):
                logger.error('plugin "%s" failed: %s', self.name, failure)
            else:
                logger.error('plugin "%s" failed: %s', self.name, failure, exc_info=failure)
        await self._release()
        self.state = FiberState.UNLOADING
        await self._teardown()
        self._failed_with = self._bound if failure is not None else {}
        self._bound = {}
        self.state = FiberState.PENDING if failure is None else FiberState.FAILED
        self.error = failure

    async def _apply(self) -> None:
        plugin = self.plugin
        config = self._validated_config()
        if isinstance(plugin, type):
            instance = plugin(self.ctx, config)
            if isinstance(instance, Service):
                self.ctx.provide(instance.provide, instance)
            return
        apply = plugin.apply if not callable(plugin) else plugin
        result = apply(self.ctx, config)
        if result is not None and hasattr(result, "__await__"):
            result = await result
        if result is None:
            return
        if not callable(result):
            raise TypeError(f'invalid effect {result!r} returned by plugin "{self.name}"')
        self.add_effect([result])

    def _validated_config(self) -> Any:
        model = getattr(self.plugin, "Config", None)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return self.config
        raw = {} if self.config is None else self.config
        if not isinstance(raw, Mapping) and not isinstance(raw, model):
            raise ConfigError([(f"expected a mapping, got {type(raw).__name__}", ())])
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(validation_problems(exc)) from None

    async def _unload(self) -> None:
        await self._release()
        self.state = FiberState.UNLOADING
        await self._teardown()
        self._bound = {}
        self.state = FiberState.PENDING

    async def _release(self) -> None:
        """Unload the dependents of this fiber's services while they are still available."""
        self._releasing = True
        for record in tuple(self._provided):
            await self._unload_dependents(record)

    async def _teardown(self) -> None:
        """Dispose children (last first), then undo effects (last first)."""
        while self._children:
            await self._children.pop().dispose()
        while self._effects:
            pending = self._effects.pop().undo()
            if pending is not None:
                await pending

    async def _unload_dependents(self, record: tuple[str, Realm, Entry]) -> None:
        name, _realm, entry = record
        for fiber in tuple(self._root.dependents.get(name, ())):
            if fiber._bound.get(name) is not entry or fiber.within(self) or self.within(fiber):
                continue  # not bound here, or torn down as part of this very teardown
            async with fiber._transition():
                if fiber.state is FiberState.ACTIVE and fiber._bound.get(name) is entry:
                    await fiber._unload()


def describe(plugin: Any) -> tuple[str, tuple[str, ...]]:
    """A plugin's name and declared injections; raises PluginError for a non-plugin."""
    if isinstance(plugin, type) or callable(plugin):
        default = plugin.__name__
    elif hasattr(plugin, "apply"):
        default = getattr(plugin, "__name__", type(plugin).__name__)
    else:
        raise PluginError(f"{plugin!r} is not a plugin (a module with apply, a class, a function)")
    name = getattr(plugin, "name", None)
    inject = getattr(plugin, "inject", None) or ()
    if isinstance(inject, str) or not all(isinstance(n, str) for n in inject):
        raise PluginError(f'inject of plugin "{name or default}" must be a list of service names')
    return (name if isinstance(name, str) else default), tuple(inject)
