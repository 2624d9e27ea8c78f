"""Consoles and logging: colour only on a terminal, `NO_COLOR` respected, decorations on stderr
when stdout is not a terminal."""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, TYPE_CHECKING

from .errors import describe

if TYPE_CHECKING:
    from rich.console import Console

#: Line width when the output is not a terminal (tables are never squeezed for a pipe).
PIPE_WIDTH = 1000


def _console(*, stderr: bool) -> Console:
    from rich.console import Console

    console = Console(
        stderr=stderr,
        soft_wrap=True,
        highlight=False,
        no_color=bool(os.environ.get("NO_COLOR")),
    )
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console


class Consoles:
    """`out` carries the result (assistant text, tables); `deco` the decorations (tool calls,
    session ids, spinners) — the same console on a terminal, stderr when stdout is piped.

    A console not given is made when first used: importing rich is 7% of a listing's start-up,
    and a result written to a pipe as plain text needs none of it (docs/performance.md,
    "Start-up (P11)")."""

    def __init__(self, out: Console | None = None, deco: Console | None = None) -> None:
        self._out = out
        self._deco = deco

    @property
    def out(self) -> Console:
        if self._out is None:
            self._out = _console(stderr=False)
        return self._out

    @property
    def deco(self) -> Console:
        if self._deco is None:
            self._deco = self.out if self.out.is_terminal else _console(stderr=True)
        return self._deco

    @property
    def interactive(self) -> bool:
        """Whether decorations go to a terminal (spinners and progress bars only then)."""
        if self._out is None and self._deco is None and _plainly_piped(sys.stdout, sys.stderr):
            return False
        return self.deco.is_terminal

    def plain(self) -> tuple[IO[str], int] | None:
        """Where a result is written as plain text, and the line's width, when `out` is not a
        terminal; None on a terminal. A stdout that says it is no tty, with neither variable
        that makes rich call a stream a terminal (`TTY_COMPATIBLE`, `FORCE_COLOR`) set, is
        told without rich; anything else is rich's to tell."""
        if self._out is None and _plainly_piped(sys.stdout):
            return sys.stdout, PIPE_WIDTH
        out = self.out
        return None if out.is_terminal else (out.file, out.width)


def _plainly_piped(*streams: IO[str]) -> bool:
    """Whether rich would surely find none of `streams` a terminal (its own test has more
    cases)."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return False
    for stream in streams:
        isatty = getattr(stream, "isatty", None)
        try:
            if isatty is None or isatty():
                return False
        except ValueError:  # a closed stream
            return False
    return True


def consoles() -> Consoles:
    """The consoles for the current stdout/stderr (each made when first used)."""
    return Consoles()


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
