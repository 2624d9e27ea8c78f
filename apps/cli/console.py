"""Consoles and logging: colour only on a terminal, `NO_COLOR` respected, decorations on stderr
when stdout is not a terminal."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from rich.console import Console

from .errors import describe

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


class OneLineFormatter(logging.Formatter):
    """A record on one line: an attached exception adds its innermost message, not a traceback
    (`--debug` keeps the tracebacks)."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info is not None and record.exc_info[1] is not None:
            detail = describe(record.exc_info[1])
            if detail not in text:
                text = f"{text}: {detail}"
        record.message = " ".join(text.split())
        return f"dsh: {record.levelname}: {record.name}: {record.message}"


def setup_logging(*, debug: bool) -> None:
    """Standard logging to stderr: WARNING and above as one line each; everything, with
    tracebacks, under `--debug`."""
    handler = logging.StreamHandler(sys.stderr)
    if debug:
        handler.setFormatter(logging.Formatter("dsh: %(levelname)s: %(name)s: %(message)s"))
    else:
        handler.setFormatter(OneLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    # The loader logs each row that did not start; the BootError we report repeats them.
    logging.getLogger("framework.loader").setLevel(logging.DEBUG if debug else logging.CRITICAL)


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone (a closed pipe): later writes, and
    the interpreter's final flush, go nowhere instead of raising `BrokenPipeError`."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
