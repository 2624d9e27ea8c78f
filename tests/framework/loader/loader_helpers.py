"""Shared helpers for the loader tests: plugin sources written into a temporary folder."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import loader_rec
import pytest

CONFIGURED = """
from pydantic import BaseModel, ConfigDict

import loader_rec

name = "configured"


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int = 1
    greeting: str = "hi"


def apply(ctx, config):
    loader_rec.events.append(("configured", config.port, config.greeting))

    def dispose():
        loader_rec.events.append(("configured-disposed",))

    return dispose
"""

PROVIDER = """
import loader_rec

name = "demo-provider"


def apply(ctx, config):
    ctx.provide("demo", {"by": (config or {}).get("label", "provider")})
    loader_rec.events.append(("provided", (config or {}).get("label", "provider")))
"""

CONSUMER = """
import loader_rec

name = "demo-consumer"
inject = ["demo"]


def apply(ctx, config):
    loader_rec.events.append(("consumed", ctx.demo["by"]))
"""

FAILING = """
name = "failing"


def apply(ctx, config):
    raise RuntimeError("boom")
"""


def write(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` (dedented) to ``folder/name`` and return the path."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


@pytest.fixture
def rec() -> Iterator[list[tuple[Any, ...]]]:
    """The plugin event record, empty for the test."""
    loader_rec.events.clear()
    yield loader_rec.events
    loader_rec.events.clear()
