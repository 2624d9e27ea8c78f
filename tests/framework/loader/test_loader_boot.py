"""Booting manifests end to end: resolution kinds, groups, isolation, overlays, BootError."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from loader_helpers import CONFIGURED, CONSUMER, FAILING, PROVIDER, rec, write

from framework import BootError, Context, FiberState
from framework.loader import (
    boot,
    check_manifest,
    inspect_manifest,
    missing_services,
    plugin_entry_points,
    resolve_plugin,
)

pytestmark = pytest.mark.anyio
__all__ = ["rec"]

Rec = list[tuple[Any, ...]]
MODULES = (
    "loader_fx_provider",
    "loader_fx_consumer",
    "loader_fx_funcs",
    "loader_fx_aliased",
    "loader_fx_aliased_provider",
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A manifest folder that is also on sys.path, holding the test plugins."""
    write(tmp_path, "configured.py", CONFIGURED)
    write(tmp_path, "failing.py", FAILING)
    write(tmp_path, "loader_fx_provider.py", PROVIDER)
    write(tmp_path, "loader_fx_consumer.py", CONSUMER)
    write(
        tmp_path,
        "loader_fx_funcs.py",
        """
        import loader_rec

        def mounted(ctx, config):
            loader_rec.events.append(("function", config))
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def _entry_points(monkeypatch: pytest.MonkeyPatch, **targets: str) -> None:
    """Serve ``dsh.plugins`` entry points (real EntryPoint objects) for names not installed."""
    eps = {
        name: EntryPoint(name=name, value=value, group="dsh.plugins")
        for name, value in targets.items()
    }
    monkeypatch.setattr("framework.loader.plugin_entry_points", lambda: eps)


async def test_mounts_by_path_module_attribute_and_entry_point(
    folder: Path, rec: Rec, monkeypatch: pytest.MonkeyPatch
) -> None:
    _entry_points(monkeypatch, **{"dsh-test-consumer": "loader_fx_consumer"})
    manifest = write(
        folder,
        "app.yaml",
        """
        - id: consumer
          name: dsh-test-consumer
        - id: configured
          name: ./configured.py
          config: {port: 8080}
        - id: function
          name: loader_fx_funcs:mounted
          config: {a: 1}
        - id: provider
          name: loader_fx_provider
        """,
    )
    async with boot(manifest) as ctx:
        assert isinstance(ctx, Context)
        assert ctx.get("demo") == {"by": "provider"}
        assert sorted(rec) == [
            ("configured", 8080, "hi"),
            ("consumed", "provider"),
            ("function", {"a": 1}),
            ("provided", "provider"),
        ]
        rec.clear()
    assert rec == [("configured-disposed",)]


async def test_boot_waits_for_slow_providers(folder: Path, rec: Rec) -> None:
    write(
        folder,
        "slow.py",
        """
        import anyio

        name = "slow"

        async def apply(ctx, config):
            await anyio.sleep(0.02)
            ctx.provide("demo", {"by": "slow"})
        """,
    )
    manifest = write(
        folder, "app.yaml", "- {id: c, name: loader_fx_consumer}\n- {id: s, name: ./slow.py}\n"
    )
    async with boot(manifest):
        assert rec == [("consumed", "slow")]


async def test_groups_mount_children_in_isolated_realms(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        """
        - id: left
          name: framework:group
          group: true
          isolate: {demo: true}
          config:
            - {id: left-provider, name: loader_fx_provider, config: {label: left}}
            - {id: left-consumer, name: loader_fx_consumer}
        - id: right
          name: framework:group
          group: true
          isolate: {demo: true}
          config:
            - {id: right-consumer, name: loader_fx_consumer}
            - {id: right-provider, name: loader_fx_provider, config: {label: right}}
        """,
    )
    async with boot(manifest) as ctx:
        assert sorted(e for e in rec if e[0] == "consumed") == [
            ("consumed", "left"),
            ("consumed", "right"),
        ]
        assert ctx.get("demo") is None  # both providers live in their groups' private realms


async def test_pending_rows_fail_boot_naming_missing_services(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        """
        - {id: configured, name: ./configured.py}
        - {id: consumer, name: loader_fx_consumer, inject: [llm]}
        - id: g
          name: framework:group
          group: true
          config:
            - {id: nested, name: ./configured.py, inject: [tools]}
        """,
    )
    with pytest.raises(BootError) as info:
        async with boot(manifest):
            pytest.fail("booted with rows still pending")
    assert str(info.value) == (
        f"failed to boot {manifest}: 2 entries did not start\n"
        "  consumer (loader_fx_consumer): waiting for services: demo, llm\n"
        "  nested (./configured.py): waiting for services: tools"
    )
    assert info.value.hints == (
        'service "demo" is not provided by any row',
        'service "llm" is not provided by any row; add a row with name: dsh-llm',
        'service "tools" is not provided by any row; add a row with name: dsh-tools',
    )
    assert rec == [("configured", 1, "hi"), ("configured-disposed",)]


async def test_failed_rows_fail_boot_and_everything_is_disposed(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- {id: ok, name: ./configured.py}\n- {id: bad, name: ./failing.py}\n",
    )
    with pytest.raises(BootError) as info:
        async with boot(manifest):
            pytest.fail("booted with a failed row")
    assert str(info.value).splitlines()[1:] == ["  bad (./failing.py): RuntimeError: boom"]
    assert rec == [("configured", 1, "hi"), ("configured-disposed",)]


async def test_config_errors_at_activation_name_the_row(folder: Path) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- id: a\n  name: ./configured.py\n  config:\n    port: '${PORT}'\n    colour: red\n",
    )
    with pytest.raises(BootError) as info:
        async with boot(manifest, environ={"PORT": "eighty"}):
            pytest.fail("booted with an invalid config")
    assert str(info.value).splitlines()[1:] == [
        f"  a (./configured.py): invalid config for entry a ({manifest}:4):",
        "    - Input should be a valid integer, unable to parse string as an integer (at port)",
        "    - Extra inputs are not permitted (at colour)",
    ]


async def test_interpolation_at_activation_with_defaults(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- name: ./configured.py\n  config: {port: '${PORT:-7}', greeting: '${WHO:-hi} there'}\n",
    )
    async with boot(manifest, environ={"WHO": "hello"}):
        assert rec == [("configured", 7, "hello there")]


async def test_missing_variable_fails_boot_naming_it(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- id: a\n  name: ./configured.py\n  config:\n    greeting: '${DSH_TEST_GREETING}'\n",
    )
    with pytest.raises(BootError) as info:
        async with boot(manifest, environ={}):
            pytest.fail("booted with a missing variable")
    assert str(info.value).splitlines()[1:] == [
        f'  a (./configured.py): environment variable "DSH_TEST_GREETING" is not set ({manifest}:4)'
    ]
    assert rec == []


async def test_overlay_disables_a_row(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- {id: a, name: ./configured.py}\n- {id: p, name: loader_fx_provider}\n",
    )
    overlay = write(folder, "off.yaml", "- {id: a, disabled: true}\n")
    async with boot(manifest, [overlay]):
        assert rec == [("provided", "provider")]


async def test_overlay_replaces_a_policy_with_its_own_file(folder: Path, rec: Rec) -> None:
    policy = """
        import loader_rec

        name = "{name}"

        def apply(ctx, config):
            loader_rec.events.append(("policy", "{name}"))
    """
    write(folder, "stock_policy.py", policy.replace("{name}", "stock"))
    write(folder / "deploy", "my_policy.py", policy.replace("{name}", "mine"))
    manifest = write(
        folder,
        "app.yaml",
        "- {id: session-checkpoints, name: ./stock_policy.py}\n"
        "- {id: p, name: loader_fx_provider}\n",
    )
    overlay = write(
        folder / "deploy",
        "overlay.yaml",
        """
        - {id: session-checkpoints, name: ./stock_policy.py, disabled: true}
        - insert: [{id: my-checkpoints, name: ./my_policy.py}]
        """,
    )
    async with boot(manifest, [overlay]):
        assert sorted(rec) == [("policy", "mine"), ("provided", "provider")]


async def test_aliases_come_from_the_plugins_own_metadata(
    folder: Path, rec: Rec, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(folder, "loader_fx_aliased.py", CONSUMER + 'aliases = ["@deepseek-ai/dsh-agent-loop"]\n')
    write(
        folder,
        "loader_fx_aliased_provider.py",
        PROVIDER + 'aliases = ("@deepseek-ai/dsh-tool-call-timeout-policy",)\n',
    )
    _entry_points(
        monkeypatch,
        **{
            "dsh-agent": "loader_fx_aliased",
            "dsh-tool-timeout-policy": "loader_fx_aliased_provider",
            "dsh-plain": "loader_fx_consumer",
        },
    )
    manifest = write(
        folder,
        "app.yaml",
        "- {id: a, name: '@deepseek-ai/dsh-agent-loop'}\n"
        "- {id: t, name: '@deepseek-ai/dsh-tool-call-timeout-policy'}\n"
        "- {id: u, name: dsh-agent}\n",
    )
    async with boot(manifest):
        assert sorted(rec) == [
            ("consumed", "provider"),
            ("consumed", "provider"),
            ("provided", "provider"),
        ]
    assert resolve_plugin("@deepseek-ai/dsh-agent-loop", folder) is sys.modules["loader_fx_aliased"]
    # The framework knows no scope of its own: a spelling no plugin lists does not resolve.
    unlisted = write(folder, "unlisted.yaml", "- {id: p, name: '@deepseek-ai/dsh-plain'}\n")
    [problem] = check_manifest(unlisted)
    assert str(problem).endswith(
        'no "dsh.plugins" entry point or plugin alias named "@deepseek-ai/dsh-plain"'
    )


def test_every_first_party_plugin_lists_its_npm_spelling() -> None:
    """The seed's manifest names plugins `@deepseek-ai/<entry point>`; each one lists it."""
    installed = plugin_entry_points()
    first_party = {n: ep for n, ep in installed.items() if ep.value.startswith("plugins.")}
    assert "dsh-session-checkpoint-policy" in first_party
    for name, entry_point in first_party.items():
        assert resolve_plugin(f"@deepseek-ai/{name}", Path()) is entry_point.load()


def test_a_real_installed_entry_point_resolves() -> None:
    loadable = {}
    for name, ep in sorted(plugin_entry_points().items()):
        try:
            plugin = ep.load()
        except ImportError:
            continue
        if callable(getattr(plugin, "apply", None)):
            loadable[name] = plugin
    if not loadable:
        pytest.skip("no dsh.plugins entry point of this install is an importable plugin yet")
    name, plugin = next(iter(loadable.items()))
    assert resolve_plugin(f"@deepseek-ai/{name}", Path()) is plugin
    assert resolve_plugin(name, Path()) is plugin


def test_check_manifest_does_not_apply_plugins(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yaml",
        "- {id: a, name: ./configured.py, config: {port: 1}}\n- {name: ./failing.py}\n",
    )
    assert check_manifest(manifest) == []
    assert rec == []


async def test_disposed_state_after_the_block(folder: Path) -> None:
    manifest = write(folder, "app.yaml", "- {id: p, name: loader_fx_provider}\n")
    async with boot(manifest) as ctx:
        fiber = ctx.fiber
        inside = fiber.state
    assert inside is FiberState.ACTIVE
    assert fiber.state is FiberState.DISPOSED


def test_the_seed_snippet_loads_verbatim(tmp_path: Path) -> None:
    names = ("dsh-session-persistence-jsonl", "dsh-session-checkpoint-policy")
    installed = plugin_entry_points()
    for name in names:
        try:
            plugin = installed[name].load()
        except (ImportError, KeyError) as exc:
            pytest.skip(f"entry point {name} does not import yet: {exc}")
        if not callable(getattr(plugin, "apply", None)):
            pytest.skip(f"entry point {name} is not a plugin yet (no apply)")
    manifest = write(
        tmp_path,
        "app.yaml",
        """
        - id: session-persistence
          name: '@deepseek-ai/dsh-session-persistence-jsonl'
        - id: session-checkpoints
          name: '@deepseek-ai/dsh-session-checkpoint-policy'
        """,
    )
    assert check_manifest(manifest) == []
    # Alone it lacks the services its rows need; another file adds them.
    missing = missing_services(inspect_manifest(manifest))
    assert [str(p).split(" (needed")[0] for p in missing] == [
        'service "sessions" is not provided by any row; add a row with name: dsh-session',
        'service "llm" is not provided by any row; add a row with name: dsh-llm',
        'service "tools" is not provided by any row; add a row with name: dsh-tools',
    ]
    rest = write(
        tmp_path,
        "rest.yaml",
        "- insert: [{name: dsh-session}, {name: dsh-llm}, {name: dsh-tools}]\n",
    )
    assert missing_services(inspect_manifest(manifest, [rest])) == []


def test_patches_must_be_a_sequence_of_paths(folder: Path) -> None:
    manifest = write(folder, "app.yaml", "- {id: p, name: loader_fx_provider}\n")
    with pytest.raises(TypeError, match="sequence of overlay paths"):
        check_manifest(manifest, str(folder / "overlay.yaml"))


async def test_isolate_labels_share_a_realm(folder: Path) -> None:
    manifest = write(
        folder,
        "app.yaml",
        """
        - id: one
          name: loader_fx_provider
          isolate: {demo: shared}
        - id: two
          name: framework:group
          group: true
          isolate: {demo: shared}
          config:
            - {id: two-provider, name: loader_fx_provider}
        """,
    )
    with pytest.raises(BootError) as info:
        async with boot(manifest):
            pytest.fail("two providers of one shared realm both started")
    (line,) = str(info.value).splitlines()[1:]
    assert line.startswith(
        ("  one (loader_fx_provider): ", "  two-provider (loader_fx_provider): ")
    )
    assert 'service "demo" has been registered at' in line


async def test_a_failed_boot_reports_row_failures_once(
    folder: Path, rec: Rec, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = write(folder, "app.yaml", "- {id: bad, name: ./failing.py}\n")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BootError) as info:
        async with boot(manifest):
            pytest.fail("booted with a failed row")
    assert "bad (./failing.py): RuntimeError: boom" in str(info.value)
    assert not [r for r in caplog.records if r.name == "framework"]  # the BootError has them
    (held,) = [r for r in caplog.records if 'plugin "failing" failed' in r.getMessage()]
    assert held.levelno == logging.DEBUG
    assert held.exc_info is not None  # the traceback stays for --debug


async def test_errors_logged_during_a_boot_that_succeeds_are_kept(
    folder: Path, rec: Rec, caplog: pytest.LogCaptureFixture
) -> None:
    write(
        folder,
        "noisy.py",
        """
        import logging

        def apply(ctx, config):
            logging.getLogger("framework").error("a listener failed")
        """,
    )
    manifest = write(folder, "app.yaml", "- {id: noisy, name: ./noisy.py}\n")
    async with boot(manifest):
        pass
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("framework", logging.ERROR, "a listener failed")
    ]
