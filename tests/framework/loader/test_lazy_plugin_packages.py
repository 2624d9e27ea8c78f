"""Plugin packages that import their modules on first use: resolving them stays cheap, and what
they provide is still seen without applying them (a declared `provides`)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from framework import Service
from framework.loader import inspect_manifest, provided_services, rows_serving
from framework.manifest import load_manifest

#: Lazy packages that provide a service (they declare `provides`).
LAZY = ("plugins.agent", "plugins.tool_approval", "plugins.llm", "plugins.tools")
#: Every package that imports some of its public names on first use.
LAZY_NAMES = (
    *LAZY,
    "plugins.llm_retry",
    "plugins.llm_replay",
    "plugins.demo_tools",
    "plugins.session_checkpoint_policy",
)

#: Modules a boot of the default manifest's store alone leaves unimported.
HEAVY = (
    "plugins.demo_tools.config",
    "plugins.demo_tools.ledger",
    "plugins.demo_tools.workspace",
    "plugins.llm.chunks",
    "plugins.llm.registry",
    "plugins.llm.service",
    "plugins.llm_replay.adapter",
    "plugins.llm_replay.config",
    "plugins.llm_replay.script",
    "plugins.llm_retry.config",
    "plugins.llm_retry.executor",
    "plugins.session_checkpoint_policy.barriers",
    "plugins.session_checkpoint_policy.metrics",
    "plugins.tools.decisions",
    "plugins.tools.decorator",
    "plugins.tools.definition",
    "plugins.tools.errors",
    "plugins.tools.execution",
    "plugins.tools.pipeline",
    "plugins.tools.results",
    "plugins.tools.service",
)


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


@pytest.mark.parametrize("module", LAZY_NAMES)
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
        "import apps.cli.commands, apps.cli.listing\n"
        "found = inspect_manifest(default_manifest())\n"
        "assert not found.problems, found.problems\n"
        "heavy = ('plugins.agent.agent', 'plugins.agent.service', 'plugins.tool_approval.service',"
        " 'plugins.tool_approval.continuation')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_booting_the_store_of_the_default_manifest_leaves_models_and_tools_unimported(
    tmp_path: Path,
) -> None:
    # `dsh sessions` boots only `sessionPersistence` but resolves every row: resolving a model,
    # tools or policy row does not import its machinery (docs/performance.md, "Start-up (P11)").
    code = (
        "import sys, anyio\n"
        "from apps.cli.paths import default_manifest\n"
        "from framework.loader import boot\n"
        "import apps.cli.commands, apps.cli.listing\n"
        "async def main():\n"
        "    async with boot(default_manifest(), services=['sessionPersistence']) as ctx:\n"
        "        assert ctx.get('sessionPersistence') is not None\n"
        "anyio.run(main)\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "DSH_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert done.stdout.strip() == "[]"


def test_an_inspection_without_validation_resolves_rows_but_checks_no_config() -> None:
    text = (
        "- id: tools\n  name: dsh-tools\n  config: {cancel_grace_ms: -1, nope: '${UNSET_VAR}'}\n"
        "- id: gone\n  name: no.such.module\n"
    )
    checked = inspect_manifest(text, environ={})
    resolved = inspect_manifest(text, environ={}, validate=False)
    assert [p.entry for p in checked.problems] == ["gone", "tools"]
    assert [p.entry for p in resolved.problems] == ["gone"]
    assert resolved.configs == {}
    assert resolved.plugins == checked.plugins
    assert resolved.plugins["tools"] is importlib.import_module("plugins.tools")
