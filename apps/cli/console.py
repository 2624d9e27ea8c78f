"""Consoles and logging: colour only on a terminal, `NO_COLOR` respected, decorations on stderr
when stdout is not a terminal."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from rich.console import Console

#: Line width when the output is not a terminal (tables are never squeezed for a pipe).
PIPE_WIDTH = 1000


def _console(*, stderr: bool) -> Console:
    console = Console(
        stderr=stderr,
        soft_wrap=True,
        highlight=False,
        no_color=bool(os.environ.get("NO_COLOR")),
    )
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console


@dataclass(frozen=True)
class Consoles:
    """`out` carries the result (assistant text, tables); `deco` the decorations (tool calls,
    session ids, spinners) — the same console on a terminal, stderr when stdout is piped."""

    out: Console
    deco: Console

    @property
    def interactive(self) -> bool:
        """Whether decorations go to a terminal (spinners and progress bars only then)."""
        return self.deco.is_terminal


def consoles() -> Consoles:
    """The consoles for the current stdout/stderr."""
    out = _console(stderr=False)
    deco = out if out.is_terminal else _console(stderr=True)
    return Consoles(out, deco)


def setup_logging(*, debug: bool) -> None:
    """Standard logging to stderr: WARNING and above, everything with `--debug`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dsh: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    # The loader logs each row that did not start; the BootError we report repeats them.
    logging.getLogger("framework.loader").setLevel(logging.DEBUG if debug else logging.CRITICAL)
