"""The Loader: resolve manifest rows to plugins, check a manifest, boot it into a Context."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
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
from framework.sources import ManifestInput, ManifestSource, manifest_source

__all__ = ["boot", "check_manifest", "plugin_entry_points", "resolve_plugin"]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP: Final = "dsh.plugins"
_SCOPE: Final = "@deepseek-ai/"
_NPM_ALIASES: Final = {
    "dsh-agent-loop": "dsh-agent",
    "dsh-tool-call-timeout-policy": "dsh-tool-timeout-policy",
}
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

    Order: an entry point (``@deepseek-ai/<x>`` is an alias of ``<x>``), a ``./`` or ``../`` path
    against ``base_dir`` (the folder of the file the row comes from: the manifest, or the overlay
    that inserted it), a dotted module path, ``module:attribute``. ``installed`` defaults to
    :func:`plugin_entry_points`. Raises ``_Unresolved``.
    """
    if name.startswith("framework:"):
        raise _Unresolved(f'unknown builtin (only "{GROUP}")')
    alias = name.removeprefix(_SCOPE)
    alias = _NPM_ALIASES.get(alias, alias) if name.startswith(_SCOPE) else alias
    entry_point = (plugin_entry_points() if installed is None else installed).get(alias)
    if entry_point is not None:
        return _check_plugin(_load(entry_point.load, f"entry point {alias!r}"), name)
    if name.startswith(_SCOPE):
        raise _Unresolved(f'no "{ENTRY_POINT_GROUP}" entry point named "{alias}"')
    if name.startswith(("./", "../")):
        return _check_plugin(_import_path(base_dir / name), name)
    module_name, _, attribute = name.partition(":")
    if not _DOTTED.fullmatch(module_name) or (attribute and not _DOTTED.fullmatch(attribute)):
        raise _Unresolved("not an entry point, a ./relative path or a module path")
    plugin: object = _import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        try:
            plugin = getattr(plugin, part)
        except AttributeError:
            raise _Unresolved(f'"{module_name}" has no attribute "{attribute}"') from None
    return _check_plugin(plugin, name)


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
    """
    environ = os.environ if environ is None else environ
    parsed, plugins, problems = _prepare(manifest_source(manifest, base_dir), patches)
    if parsed is None:
        return problems
    for entry in parsed.walk(enabled_only=True):
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
            continue
        try:
            model.model_validate({} if config is None else config)
        except ValidationError as exc:
            text = _invalid_config(entry, validation_problems(exc))
            problems.append(ManifestProblem(text, entry.config_loc or entry.loc, entry.id))
    return problems


class _Mounter:
    """Mounts rows into contexts and keeps the latest fiber (or failure) of each row."""

    def __init__(
        self, plugins: dict[str, object], environ: Mapping[str, str], source: ManifestSource
    ) -> None:
        self.source = source
        self.plugins = plugins
        self.environ = environ
        self.fibers: dict[str, tuple[Entry, Fiber]] = {}
        self.failures: dict[str, tuple[Entry, str]] = {}

    def mount(self, ctx: Context, entry: Entry) -> None:
        if entry.disabled:
            return
        plugin = self._group(entry) if entry.group else self.plugins[entry.id]
        try:
            config = interpolate(entry.config, self.environ, entry.env_refs)
        except MissingVariable as exc:
            self.failures[entry.id] = (entry, str(exc))
            return
        self.failures.pop(entry.id, None)
        fiber = ctx.plugin(
            plugin,
            config,
            inject=entry.inject,
            isolate=entry.isolate,
            base_dir=self.source.folder_of(entry.loc.path),
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

    @staticmethod
    def _error(entry: Entry, error: BaseException | None) -> str:
        if isinstance(error, ConfigError):
            return _invalid_config(entry, error.problems)
        if error is None:
            return "failed"
        if isinstance(error, FrameworkError):
            return str(error) or type(error).__name__
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


@asynccontextmanager
async def boot(
    manifest: ManifestInput,
    patches: Patches = (),
    *,
    environ: Mapping[str, str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> AsyncIterator[Context]:
    """Boot a manifest (plus overlays) into a new root :class:`Context`.

    The manifest is a file path, YAML text (a ``str`` with a line break) or a list of row
    mappings; relative names in text or rows resolve against ``base_dir`` (default: the working
    folder now). Every row is mounted concurrently and boot waits until all have settled. Raises
    ``ManifestError`` (all parse, shape and resolution problems) or ``BootError`` (rows FAILED
    or still PENDING; everything is disposed first). Leaving the block disposes everything.
    """
    source = manifest_source(manifest, base_dir)
    parsed, plugins, problems = _prepare(source, patches)
    if parsed is None or problems:
        raise ManifestError("\n".join(str(p) for p in problems))
    mounter = _Mounter(plugins, os.environ if environ is None else environ, source)
    failed: list[str] = []
    async with Context() as ctx:
        for entry in parsed.entries:
            mounter.mount(ctx, entry)
        await ctx.settle()
        failed = mounter.problems()
        if not failed:
            yield ctx
    if failed:
        for line in failed:
            log.error("failed to apply loader entry %s", line)
        body = "\n".join("  " + line.replace("\n", "\n  ") for line in failed)
        raise BootError(
            f"failed to boot {source.label}: {len(failed)} entries did not start\n{body}"
        )
