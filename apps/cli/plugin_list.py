"""`dsh plugins`: the `dsh.plugins` entry points, their modules and the services they provide."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType

from framework import Service
from framework.loader import plugin_entry_points


@dataclass(frozen=True)
class PluginInfo:
    """One entry point as `dsh plugins` shows it."""

    entry_point: str
    module: str
    provides: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    problem: str | None = None

    def to_json(self) -> dict[str, object]:
        """The `--json` line."""
        return {
            "name": self.entry_point,
            "module": self.module,
            "provides": list(self.provides),
            "needs": list(self.needs),
            "problem": self.problem,
        }


def provided_services(plugin: object) -> tuple[str, ...]:
    """The services a plugin module provides: the `Service` classes its package defines, and
    `sessionPersistence` for a backend mounted with `mount_persistence`."""
    if not isinstance(plugin, ModuleType):
        return ()
    names: list[str] = []
    for value in vars(plugin).values():
        if (
            inspect.isclass(value)
            and issubclass(value, Service)
            and value is not Service
            and (value.__module__ + ".").startswith(plugin.__name__ + ".")  # not an import
        ):
            provide = getattr(value, "provide", None)
            if isinstance(provide, str):
                names.append(provide)
    if hasattr(plugin, "mount_persistence"):
        names.append("sessionPersistence")
    return tuple(dict.fromkeys(names))


def plugin_infos() -> list[PluginInfo]:
    """Every installed entry point of the group, by name."""
    infos = []
    for name, entry_point in sorted(plugin_entry_points().items()):
        try:
            plugin = entry_point.load()
        except Exception as error:
            infos.append(PluginInfo(name, entry_point.value, problem=f"failed to import: {error}"))
            continue
        needs = tuple(str(n) for n in getattr(plugin, "inject", None) or ())
        infos.append(PluginInfo(name, entry_point.value, provided_services(plugin), needs))
    return infos
