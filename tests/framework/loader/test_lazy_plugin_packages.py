"""Plugin packages that import their modules on first use: resolving them stays cheap, and what
they provide is still seen without applying them (a declared `provides`)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from types import ModuleType

import pytest

from framework import Service
from framework.loader import provided_services, rows_serving
from framework.manifest import load_manifest

LAZY = ("plugins.agent", "plugins.tool_approval")


def _service_names(package: ModuleType) -> set[str]:
    """The `provide` of the Service classes among the package's public names (imports them)."""
    names = set()
    for attribute in package.__all__:
        value = getattr(package, attribute)
        if isinstance(value, type) and issubclass(value, Service) and value is not Service:
            names.add(value.provide)
    return names


@pytest.mark.parametrize("module", LAZY)
def test_a_lazy_package_declares_what_its_service_classes_provide(module: str) -> None:
    package = importlib.import_module(module)
    assert set(provided_services(package)) == _service_names(package)
    assert set(provided_services(package)) == set(package.provides)


@pytest.mark.parametrize("module", LAZY)
def test_every_public_name_of_a_lazy_package_imports(module: str) -> None:
    package = importlib.import_module(module)
    assert all(getattr(package, attribute) is not None for attribute in package.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        package.nothing_here  # noqa: B018


def test_a_module_plugin_s_provides_list_counts_without_a_service_class() -> None:
    plugin = ModuleType("declared")
    plugin.provides = ["store", 3]  # type: ignore[attr-defined]
    plugin.apply = lambda ctx, config: None  # type: ignore[attr-defined]
    assert provided_services(plugin) == ("store",)
    manifest, _ = load_manifest("<rows>", text="- id: store\n  name: x\n")
    assert manifest is not None
    assert rows_serving(manifest, {"store": plugin}, ["store"]) == {"store"}


def test_resolving_the_default_manifest_leaves_the_agent_and_approval_machinery_unimported() -> (
    None
):
    # `dsh sessions` resolves every row; it should not pay for the agent's turn loop or the
    # approval pipeline (docs/performance.md, "Start-up (P11)").
    code = (
        "import sys\n"
        "from apps.cli.paths import default_manifest\n"
        "from framework.loader import inspect_manifest\n"
        "import apps.cli.main, apps.cli.listing\n"
        "found = inspect_manifest(default_manifest())\n"
        "assert not found.problems, found.problems\n"
        "heavy = ('plugins.agent.agent', 'plugins.agent.service', 'plugins.tool_approval.service',"
        " 'plugins.tool_approval.continuation')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
