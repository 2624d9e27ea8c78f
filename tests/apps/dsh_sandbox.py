"""A sandbox for running the real `dsh` console script in a throwaway home.

Every test runs the installed `dsh` executable in a subprocess with a temporary `DSH_HOME`,
`DSH_WORKSPACE` and working directory, so nothing touches the user's `~/.dsh`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def dsh_executable() -> str:
    """The `dsh` console script of the running interpreter's environment."""
    beside = Path(sys.executable).parent / "dsh"
    if beside.is_file():
        return str(beside)
    found = shutil.which("dsh")
    if found is None:
        pytest.fail("the dsh console script is not installed (pip install -e .)")
    return found


@dataclass
class Sandbox:
    """A temporary home, workspace and cwd for `dsh` processes."""

    root: Path
    executable: str

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
        env.pop("NO_COLOR", None)
        env.update(DSH_HOME=str(self.home), DSH_WORKSPACE=str(self.workspace))
        env.update(extra or {})
        return env

    def argv(self, *args: str | Path) -> list[str]:
        return [self.executable, *(str(a) for a in args)]

    def __call__(
        self,
        *args: str | Path,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run `dsh *args` to completion."""
        return subprocess.run(
            self.argv(*args),
            cwd=self.root,
            env=self.env(env),
            input=input,
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str | Path, **kwargs: Any) -> subprocess.Popen[str]:
        """Start `dsh *args` in the background."""
        return subprocess.Popen(
            self.argv(*args), cwd=self.root, env=self.env(), text=True, **kwargs
        )

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def files(self) -> dict[str, bytes]:
        """Every file under the home and the workspace, with its bytes."""
        return {
            str(p.relative_to(self.root)): p.read_bytes()
            for base in (self.home, self.workspace)
            if base.exists()
            for p in sorted(base.rglob("*"))
            if p.is_file()
        }
