"""The Loader: resolve manifest rows to plugins, check a manifest, boot it into a Context."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Final

from pydantic import BaseModel, ValidationError

from framework.context import Context
from framework.errors import (
    BootError,
    ConfigError,
    FrameworkError,
    ManifestError,
    PluginError,
    format_problems,
    validation_problems,
)
from framework.fiber import Fiber, FiberState, describe
from framework.manifest import (
    GROUP,
    Entry,
    Manifest,
    ManifestProblem,
    MissingVariable,
    interpolate,
    load_manifest,
)
from framework.service import Service
from framework.sources import ManifestInput, ManifestSource, manifest_source

__all__ = [
    "ManifestCheck",
    "boot",
    "check_manifest",
    "inspect_manifest",
    "missing_service_hint",
    "missing_services",
    "plugin_entry_points",
    "provided_services",
    "resolve_plugin",
    "rows_serving",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP: Final = "dsh.plugins"
_DOTTED: Final = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
Patches = Sequence[str | Path]


class _Unresolved(Exception):
    """Internal: why a plugin name did not resolve."""


def plugin_entry_points() -> dict[str, EntryPoint]:
    """The installed ``dsh.plugins`` entry points by name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve_plugin(
    name: str, base_dir: Path, installed: Mapping[str, EntryPoint] | None = None
) -> object:
    """Resolve a row's plugin name (not ``framework:group``) to a plugin object.

    Order: an entry point of that name; an alias a plugin lists in its ``aliases`` (for names
    that cannot be a path or a module path, e.g. an npm spelling); a ``./`` or ``../`` path
    against ``base_dir`` (the folder of the file the row comes from: the manifest, or the overlay
    that inserted it); a dotted module path; ``module:attribute``. ``installed`` defaults to
    :func:`plugin_entry_points`. Raises ``_Unresolved``.
    """
    if name.startswith("framework:"):
        raise _Unresolved(f'unknown builtin (only "{GROUP}")')
    entry_points_ = plugin_entry_points() if installed is None else installed
    entry_point = entry_points_.get(name)
    if entry_point is not None:
        return _check_plugin(_load(entry_point.load, f"entry point {name!r}"), name)
    if name.startswith(("./", "../")):
        return _check_plugin(_import_path(base_dir / name), name)
    module_name, _, attribute = name.partition(":")
    if not _DOTTED.fullmatch(module_name) or (attribute and not _DOTTED.fullmatch(attribute)):
        aliased = _aliased(name, entry_points_)
        if aliased is not None:
            return _check_plugin(aliased, name)
        raise _Unresolved(f'no "{ENTRY_POINT_GROUP}" entry point or plugin alias named "{name}"')
    plugin: object = _import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        try:
            plugin = getattr(plugin, part)
        except AttributeError:
            raise _Unresolved(f'"{module_name}" has no attribute "{attribute}"') from None
    return _check_plugin(plugin, name)


def _aliased(name: str, installed: Mapping[str, EntryPoint]) -> object | None:
    """The installed plugin whose ``aliases`` lists `name`, or None.

    The entry point named like the alias's last ``/`` segment is tried first (an npm spelling
    ``@scope/pkg`` usually aliases ``pkg``), so the common case imports one plugin, not all.
    """
    last = name.rpartition("/")[2]
    ordered = sorted(installed.values(), key=lambda ep: ep.name != last)
    for entry_point in ordered:
        try:
            plugin: object = entry_point.load()
        except Exception:
            continue  # an uninstallable plugin cannot be the alias's target; its own row says so
        if name in _aliases_of(plugin):
            return plugin
    return None


def _aliases_of(plugin: object) -> tuple[str, ...]:
    aliases = getattr(plugin, "aliases", ())
    if isinstance(aliases, str) or not isinstance(aliases, list | tuple):
        return ()
    return tuple(a for a in aliases if isinstance(a, str))


def _load(load: Callable[[], object], what: str) -> object:
    try:
        return load()
    except Exception as exc:
        raise _Unresolved(f"{what} failed to import: {type(exc).__name__}: {exc}") from None


def _import_module(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise _Unresolved(f'no module named "{module_name}"') from None
        raise _Unresolved(f'module "{module_name}" failed to import: {exc}') from None
    except Exception as exc:
        raise _Unresolved(
            f'module "{module_name}" failed to import: {type(exc).__name__}: {exc}'
        ) from None


def _import_path(path: Path) -> ModuleType:
    """Import a ``.py`` file or a package folder under a module name unique to its path."""
    path = path.resolve()
    if path.is_dir():
        init, search = path / "__init__.py", [str(path)]
        if not init.is_file():
            raise _Unresolved(f"{path} is a folder without __init__.py")
    elif path.suffix == ".py" and path.is_file():
        init, search = path, None
    elif path.with_name(path.name + ".py").is_file():
        init, search = path.with_name(path.name + ".py"), None
    else:
        raise _Unresolved(f"no such file or package: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"_dsh_manifest_{digest}_{stem}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(
        module_name, init, submodule_search_locations=search
    )
    if spec is None or spec.loader is None:
        raise _Unresolved(f"cannot import {init}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[module_name]
        if not isinstance(exc, Exception):
            raise
        raise _Unresolved(f"{init} failed to import: {type(exc).__name__}: {exc}") from None
    return module


def _check_plugin(plugin: object, name: str) -> object:
    if isinstance(plugin, ModuleType):
        if not callable(getattr(plugin, "apply", None)):
            raise _Unresolved(f'module "{plugin.__name__}" is not a plugin (it has no apply)')
    elif not callable(plugin):
        raise _Unresolved(f"{name} is not a plugin ({type(plugin).__name__})")
    try:
        describe(plugin)
    except PluginError as exc:
        raise _Unresolved(str(exc)) from None
    return plugin


def _config_model(plugin: object) -> type[BaseModel] | None:
    model = getattr(plugin, "Config", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _invalid_config(entry: Entry, problems: list[tuple[str, tuple[str | int, ...]]]) -> str:
    loc = entry.config_loc or entry.loc
    return f"invalid config for entry {entry.id} ({loc.at}):\n" + format_problems(problems)


def _prepare(
    source: ManifestSource, patches: Patches
) -> tuple[Manifest | None, dict[str, object], list[ManifestProblem]]:
    """Parse, apply overlays and resolve every enabled row; collect every problem."""
    if isinstance(patches, str | Path):
        raise TypeError("patches must be a sequence of overlay paths, not one path")
    manifest, problems = load_manifest(source.label, patches, text=source.text)
    if manifest is None:
        return None, {}, problems
    plugins: dict[str, object] = {}
    installed = plugin_entry_points()
    for entry in manifest.walk(enabled_only=True):
        if entry.group:
            continue
        try:
            base_dir = source.folder_of(entry.name_loc.path)
            plugins[entry.id] = resolve_plugin(entry.name, base_dir, installed)
        except _Unresolved as exc:
            message = (
                f'cannot resolve plugin "{entry.name}" for entry {entry.id} '
                f"({entry.name_loc.at}): {exc}"
            )
            problems.append(ManifestProblem(message, entry.name_loc, entry.id))
    return manifest, plugins, problems


def provided_services(plugin: object) -> tuple[str, ...]:
    """The services a plugin provides, as far as can be told without applying it: the
    ``provide`` of a ``Service`` class plugin; for a module, the names its ``provides`` lists
    (a package that imports its modules lazily declares them so), the ``provide`` of the
    ``Service`` classes its own package defines (a class it imports to read a service it uses
    does not count), and ``sessionPersistence`` when it mounts a persistence backend (it exports
    ``mount_persistence``). A plugin providing through ``ctx.provide`` alone is invisible here."""
    if isinstance(plugin, type):
        provide = getattr(plugin, "provide", None) if issubclass(plugin, Service) else None
        return (provide,) if isinstance(provide, str) else ()
    if not isinstance(plugin, ModuleType):
        return ()
    declared = vars(plugin).get("provides", ())  # not through a lazy package's __getattr__
    listed = declared if isinstance(declared, list | tuple) else ()
    names = [n for n in listed if isinstance(n, str)]
    for value in vars(plugin).values():
        if (
            isinstance(value, type)
            and issubclass(value, Service)
            and value is not Service
            and (value.__module__ + ".").startswith(plugin.__name__ + ".")
        ):
            provide = getattr(value, "provide", None)
            if isinstance(provide, str):
                names.append(provide)
    if hasattr(plugin, "mount_persistence"):
        names.append("sessionPersistence")
    return tuple(dict.fromkeys(names))


def missing_service_hint(service: str, installed: Mapping[str, EntryPoint] | None = None) -> str:
    """``service "<s>" is not provided by any row; add a row with name: <entry point>``, naming
    the installed plugins that provide it (from the entry points)."""
    providers = []
    for name, entry_point in sorted((installed or plugin_entry_points()).items()):
        try:
            plugin = entry_point.load()
        except Exception:  # a broken entry point provides nothing; `dsh plugins` reports it
            continue
        if service in provided_services(plugin):
            providers.append(name)
    text = f'service "{service}" is not provided by any row'
    if not providers:
        return text
    others = f" (or {', '.join(providers[1:])})" if providers[1:] else ""
    return f"{text}; add a row with name: {providers[0]}{others}"


@dataclass
class ManifestCheck:
    """What a static check found: the manifest (None when it did not parse), each enabled
    row's resolved plugin and interpolated, validated config, the problems and the warnings."""

    manifest: Manifest | None
    plugins: dict[str, object] = field(default_factory=dict)
    configs: dict[str, object] = field(default_factory=dict)
    problems: list[ManifestProblem] = field(default_factory=list)
    warnings: list[ManifestProblem] = field(default_factory=list)


def inspect_manifest(
    manifest: ManifestInput,
    patches: Patches = (),
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    validate: bool = True,
) -> ManifestCheck:
    """Check a manifest and its overlays without applying any plugin (see
    :func:`check_manifest`), keeping what the check resolved for further checks.

    ``validate=False`` only parses, applies the overlays and resolves the rows: no ``${VAR}``
    is expanded and no ``Config`` validated (``configs`` stays empty), for a caller that asks
    only which plugins a manifest mounts."""
    environ = os.environ if environ is None else environ
    parsed, plugins, problems = _prepare(manifest_source(manifest, base_dir), patches)
    if not validate:
        check = ManifestCheck(parsed, plugins, {}, problems)
        check.warnings = [] if parsed is None else list(parsed.warnings)
        return check
    return _inspect(parsed, plugins, problems, environ)


def _inspect(
    manifest: Manifest | None,
    plugins: dict[str, object],
    problems: list[ManifestProblem],
    environ: Mapping[str, str],
) -> ManifestCheck:
    result = ManifestCheck(manifest, plugins, {}, problems)
    if manifest is None:
        return result
    result.warnings = list(manifest.warnings)
    for entry in manifest.walk(enabled_only=True):
        plugin = plugins.get(entry.id)
        if plugin is None:
            continue
        try:
            config = interpolate(entry.config, environ, entry.env_refs)
        except MissingVariable as exc:
            message = f"failed to apply loader entry {entry.id} ({entry.name}): {exc}"
            problems.append(ManifestProblem(message, exc.loc, entry.id))
            continue
        model = _config_model(plugin)
        if model is None:
            result.configs[entry.id] = config
            continue
        try:
            result.configs[entry.id] = model.model_validate({} if config is None else config)
        except ValidationError as exc:
            text = _invalid_config(entry, validation_problems(exc))
            problems.append(ManifestProblem(text, entry.config_loc or entry.loc, entry.id))
    return result


def check_manifest(
    manifest: ManifestInput,
    patches: Patches = (),
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> list[ManifestProblem]:
    """Every problem of a manifest and its overlays, without applying any plugin.

    The manifest is a file path, YAML text or a list of rows (see ``framework.sources``).
    Checks syntax, shape, overlays, name resolution, ``${VAR}`` variables and each resolved
    plugin's ``Config``. Each problem names its file (or ``<manifest>``/``<rows>``) and line.
    A manifest may be completed by another file, so services no row provides are left to
    :func:`missing_services`.
    """
    return inspect_manifest(manifest, patches, environ=environ, base_dir=base_dir).problems


def _needs(entry: Entry, plugin: object) -> tuple[str, ...]:
    try:
        declared = describe(plugin)[1]
    except PluginError:
        declared = ()
    return tuple(dict.fromkeys((*declared, *entry.inject)))


def missing_services(found: ManifestCheck) -> list[ManifestProblem]:
    """One problem per service that enabled rows need and no enabled row provides (what boot
    would leave PENDING), naming the installed plugin that provides it."""
    if found.manifest is None:
        return []
    manifest, plugins = found.manifest, found.plugins
    rows = [(e, plugins[e.id]) for e in manifest.walk(enabled_only=True) if e.id in plugins]
    provided = {service for _, plugin in rows for service in provided_services(plugin)}
    needed: dict[str, list[Entry]] = {}
    for entry, plugin in rows:
        for service in _needs(entry, plugin):
            if service not in provided:
                needed.setdefault(service, []).append(entry)
    if not needed:
        return []
    installed = plugin_entry_points()
    problems = []
    for service, entries in needed.items():
        first = entries[0]
        ids = ", ".join(e.id for e in entries)
        label = "entry" if len(entries) == 1 else "entries"
        message = f"{missing_service_hint(service, installed)} (needed by {label} {ids})"
        problems.append(ManifestProblem(message, first.loc, first.id))
    return problems


def rows_serving(
    manifest: Manifest, plugins: Mapping[str, object], services: Collection[str]
) -> set[str] | None:
    """The ids of the enabled rows a boot needs to provide `services`: every row providing one
    of them, the rows providing what those need (transitively) and the groups holding them.

    None when that cannot be told without applying plugins: a service in the closure that no
    row visibly provides (see :func:`provided_services`) may come from a row's ``ctx.provide``.
    """
    rows: dict[str, tuple[Entry, object]] = {}
    parents: dict[str, Entry] = {}
    providers: dict[str, list[str]] = {}
    for entry in manifest.walk(enabled_only=True):
        for child in entry.children:
            parents[child.id] = entry
        if entry.group or entry.id not in plugins:
            continue
        rows[entry.id] = (entry, plugins[entry.id])
        for service in provided_services(plugins[entry.id]):
            providers.setdefault(service, []).append(entry.id)
    chosen: set[str] = set()
    wanted, seen = list(services), set()
    while wanted:
        service = wanted.pop()
        if service in seen:
            continue
        seen.add(service)
        if service not in providers:
            return None
        for row_id in providers[service]:
            if row_id not in chosen:
                chosen.add(row_id)
                wanted.extend(_needs(*rows[row_id]))
    for row_id in list(chosen):
        parent = parents.get(row_id)
        while parent is not None and parent.id not in chosen:
            chosen.add(parent.id)
            parent = parents.get(parent.id)
    return chosen


class _Mounter:
    """Mounts rows into contexts and keeps the latest fiber (or failure) of each row; with
    `selected`, only those rows (see :func:`rows_serving`)."""

    def __init__(
        self,
        plugins: dict[str, object],
        environ: Mapping[str, str],
        source: ManifestSource,
        selected: set[str] | None = None,
    ) -> None:
        self.source = source
        self.plugins = plugins
        self.environ = environ
        self.selected = selected
        self.fibers: dict[str, tuple[Entry, Fiber]] = {}
        self.failures: dict[str, tuple[Entry, str]] = {}

    def mount(self, ctx: Context, entry: Entry) -> None:
        if entry.disabled or (self.selected is not None and entry.id not in self.selected):
            return
        plugin = self._group(entry) if entry.group else self.plugins[entry.id]
        try:
            config = interpolate(entry.config, self.environ, entry.env_refs)
        except MissingVariable as exc:
            self.failures[entry.id] = (entry, str(exc))
            return
        self.failures.pop(entry.id, None)
        # Relative paths in a config are relative to the file that wrote it: an overlay that
        # patches a row's config in is that file (docs/manifests.md, "Overlays").
        written = entry.config_loc or entry.loc
        fiber = ctx.plugin(
            plugin,
            config,
            inject=entry.inject,
            isolate=entry.isolate,
            base_dir=self.source.folder_of(written.path),
        )
        self.fibers[entry.id] = (entry, fiber)

    def _group(self, entry: Entry) -> Callable[[Context, object], None]:
        def group(ctx: Context, _config: object) -> None:
            for child in entry.children:
                self.mount(ctx, child)

        group.__name__ = group.__qualname__ = GROUP
        return group

    def problems(self) -> list[str]:
        """``<id> (<name>): <reason>`` for every row that is FAILED or PENDING."""
        lines = [f"{e.id} ({e.name}): {reason}" for e, reason in self.failures.values()]
        for entry, fiber in self.fibers.values():
            if fiber.state is FiberState.FAILED:
                lines.append(f"{entry.id} ({entry.name}): {self._error(entry, fiber.error)}")
            elif fiber.state is FiberState.PENDING:
                waiting = ", ".join(fiber.waiting_for())
                lines.append(f"{entry.id} ({entry.name}): waiting for services: {waiting}")
        return lines

    def hints(self) -> list[str]:
        """A hint for each service that PENDING rows await and no row of the manifest
        provides (naming the installed plugin that does)."""
        awaited: dict[str, None] = {}
        for _entry, fiber in self.fibers.values():
            if fiber.state is FiberState.PENDING:
                awaited.update(dict.fromkeys(fiber.waiting_for()))
        provided = {s for plugin in self.plugins.values() for s in provided_services(plugin)}
        unprovided = [service for service in awaited if service not in provided]
        if not unprovided:
            return []
        installed = plugin_entry_points()
        return [missing_service_hint(service, installed) for service in unprovided]

    @staticmethod
    def _error(entry: Entry, error: BaseException | None) -> str:
        if isinstance(error, ConfigError):
            return _invalid_config(entry, error.problems)
        if error is None:
            return "failed"
        if isinstance(error, FrameworkError):
            return str(error) or type(error).__name__
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class _HeldErrors(logging.Filter):
    """Holds the ``framework`` logger's error records while a boot settles: a failed boot
    reports each failed row in its ``BootError``, so they are not logged a second time."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        self.records.append(record)
        return False


@contextmanager
def _holding_framework_errors() -> Iterator[_HeldErrors]:
    framework_log = logging.getLogger("framework")
    held = _HeldErrors()
    framework_log.addFilter(held)
    try:
        yield held
    finally:
        framework_log.removeFilter(held)


@asynccontextmanager
async def boot(
    manifest: ManifestInput,
    patches: Patches = (),
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    services: Collection[str] | None = None,
    resolved: Callable[[Manifest, Mapping[str, object]], None] | None = None,
) -> AsyncIterator[Context]:
    """Boot a manifest (plus overlays) into a new root :class:`Context`.

    The manifest is a file path, YAML text (a ``str`` with a line break) or a list of row
    mappings; relative names in text or rows resolve against ``base_dir`` (default: the working
    folder now). Every row is mounted concurrently and boot waits until all have settled.

    With ``services``, only the rows needed to provide them are mounted (see
    :func:`rows_serving`; every row when that cannot be told). The whole manifest is still
    parsed and every row resolved, so a broken manifest fails the same way. The other rows'
    listeners and middleware are absent: this suits work that calls those services directly
    (reading stored sessions), not a run. ``resolved``, when given, is called once with the
    parsed manifest (overlays applied) and each enabled row's resolved plugin by row id, before
    any row is mounted: what the boot read, for a caller that would otherwise read the manifest
    again to learn which plugins it mounts. Raises
    ``ManifestError`` (all parse, shape and resolution problems) or ``BootError`` (rows FAILED
    or still PENDING, its ``hints`` naming the plugin for each awaited service no row provides;
    everything is disposed first). The framework's error records of a failed boot are logged
    at DEBUG only (the ``BootError`` carries them). Leaving the block disposes everything.
    """
    source = manifest_source(manifest, base_dir)
    parsed, plugins, problems = _prepare(source, patches)
    if parsed is None or problems:
        raise ManifestError("\n".join(str(p) for p in problems))
    if resolved is not None:
        resolved(parsed, plugins)
    selected = None if services is None else rows_serving(parsed, plugins, services)
    mounter = _Mounter(plugins, os.environ if environ is None else environ, source, selected)
    failed: list[str] = []
    hints: list[str] = []
    async with Context() as ctx:
        with _holding_framework_errors() as held:
            for entry in parsed.entries:
                mounter.mount(ctx, entry)
            await ctx.settle()
            failed = mounter.problems()
            hints = mounter.hints() if failed else []
        for record in held.records:
            if failed:
                log.debug("%s", record.getMessage(), exc_info=record.exc_info)
            else:
                logging.getLogger(record.name).handle(record)
        if not failed:
            yield ctx
    if failed:
        for line in failed:
            log.error("failed to apply loader entry %s", line)
        body = "\n".join("  " + line.replace("\n", "\n  ") for line in failed)
        raise BootError(
            f"failed to boot {source.label}: {len(failed)} entries did not start\n{body}",
            tuple(hints),
        )
