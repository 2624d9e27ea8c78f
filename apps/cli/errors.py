"""How failures become one `dsh: error: <message>` line and an exit code."""

from __future__ import annotations

import sys
import traceback

from framework import BootError, ManifestError
from plugins.session_persistence import SessionLockedError

#: Exit codes (spec 05 §2).
OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130


class CliError(Exception):
    """A failure the command reports as one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def leaf(error: BaseException) -> BaseException:
    """The one meaningful exception inside (nested) single-member exception groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def exit_code_of(error: BaseException) -> int:
    """Manifest and boot problems are usage errors (2); a lock or anything else fails (1)."""
    if isinstance(error, CliError):
        return error.exit_code
    if isinstance(error, ManifestError | BootError):
        return USAGE
    return FAILED


def one_line(text: str) -> str:
    """A multi-line message (a head and `- item` lines) as `head: item; item`."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return "".join(lines)
    items = "; ".join(line.removeprefix("- ") for line in lines[1:])
    return f"{lines[0].rstrip(':')}: {items}"


def error_lines(error: BaseException) -> list[str]:
    """The message lines: one per manifest problem, otherwise the message on one line."""
    text = str(error) or type(error).__name__
    if isinstance(error, ManifestError):
        return [line for line in text.splitlines() if line.strip()]
    if isinstance(error, SessionLockedError | CliError):
        return [text]
    if not isinstance(error, BootError) and type(error).__module__ == "builtins":
        text = f"{type(error).__name__}: {text}"
    return [one_line(text)]


def report(error: BaseException, *, debug: bool) -> int:
    """Print `error` to stderr (with its traceback under `--debug`) and return its exit code."""
    error = leaf(error)
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    for line in error_lines(error):
        print(f"dsh: error: {line}", file=sys.stderr)
    return exit_code_of(error)
