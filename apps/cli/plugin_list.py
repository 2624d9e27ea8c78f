"""`dsh plugins`: the `dsh.plugins` entry points, their modules and the services they provide."""

from __future__ import annotations

from dataclasses import dataclass

from framework.loader import plugin_entry_points, provided_services


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
