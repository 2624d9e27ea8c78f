"""Every event the first-party code listens to or dispatches is declared by its owner."""

from __future__ import annotations

import ast
import importlib
import logging
from pathlib import Path

import pytest

from framework import Event, boot
from framework.hooks import declared

ROOT = Path(__file__).resolve().parents[2]
HOOKS = (
    "plugins.agent.hooks",
    "plugins.llm.hooks",
    "plugins.session.hooks",
    "plugins.tools.hooks",
    "plugins.session_checkpoint_policy.metrics",
)
BUS_METHODS = {"on", "emit", "parallel", "serial", "bail", "waterfall", "listeners"}


def plain_names() -> dict[str, str]:
    """Event names passed as string literals to a bus method anywhere in plugins/ and apps/."""
    found: dict[str, str] = {}
    for folder in ("plugins", "apps"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in BUS_METHODS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and "/" in node.args[0].value
                ):
                    found[node.args[0].value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_plain_event_name_in_first_party_code_is_declared() -> None:
    for module in HOOKS:
        importlib.import_module(module)
    undeclared = {name: at for name, at in plain_names().items() if declared(name) is None}
    assert undeclared == {}


def test_the_owners_declare_the_runtime_events() -> None:
    names = {
        value.name
        for module in HOOKS
        for value in vars(importlib.import_module(module)).values()
        if isinstance(value, Event)
    }
    assert {
        "tools/pre-execute",
        "tools/execute",
        "tools/post-execute",
        "tools/result",
        "llm/stream",
        "session/created",
        "session/event",
        "session/flush",
        "session/disposed",
        "agent/pre-step",
        "agent/request",
        "agent/request-error",
        "agent/turn-stopping",
        "agent/status",
        "checkpoint/flushed",
    } <= names


@pytest.mark.anyio
async def test_the_default_app_boots_without_an_undeclared_event_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "framework.events")
    environ = {"DSH_HOME": str(tmp_path / "home"), "DSH_WORKSPACE": str(tmp_path / "ws")}
    async with boot(ROOT / "config" / "app.yml", environ=environ) as ctx:
        await ctx.settle()
    assert [r.getMessage() for r in caplog.records if "no plugin declares" in r.getMessage()] == []
