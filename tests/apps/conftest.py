"""Fixtures for the `dsh` command tests (see `dsh_sandbox`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox, dsh_executable


@pytest.fixture
def dsh(tmp_path: Path) -> Sandbox:
    """Run the real `dsh` in a fresh sandbox."""
    return Sandbox(tmp_path, dsh_executable())


#: An overlay replacing the replay script (the per-chunk `delay_ms` line is appended).
FAST_MODEL = """\
- id: model
  config:
    provider: replay
    model: replay
    responses:
{responses}
"""


@pytest.fixture
def replay_overlay(dsh: Sandbox) -> Callable[..., Path]:
    """Write an overlay replacing the replay script: `replay_overlay(name, yaml_items)`."""

    def write(name: str, responses: str, delay_ms: int = 0) -> Path:
        body = FAST_MODEL.format(responses=responses) + f"    delay_ms: {delay_ms}\n"
        return dsh.write(name, body)

    return write
