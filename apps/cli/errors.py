"""How failures become one `dsh: error: <message>` line and an exit code."""

from __future__ import annotations

import sys
import traceback

from framework import BootError, ManifestError
from plugins.agent.reasons import describe as describe
from plugins.agent.reasons import leaf as leaf
from plugins.agent.reasons import one_line as one_line
from plugins.session.jsonutil import dumps
from plugins.session_persistence import (
    SessionLockedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceError,
)

#: Exit codes (docs/cli.md).
OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130


#: `code` of a `CliError` that says a session id names nothing stored.
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"


class CliError(Exception):
    """A failure the command reports as one line, with its exit code and a stable `code`."""

    def __init__(self, message: str, exit_code: int = FAILED, code: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code = code or ("USAGE" if exit_code == USAGE else "FAILED")


def exit_code_of(error: BaseException) -> int:
    """Manifest and boot problems are usage errors (2); a lock or anything else fails (1)."""
    if isinstance(error, CliError):
        return error.exit_code
    if isinstance(error, ManifestError | BootError):
        return USAGE
    return FAILED


def error_code(error: BaseException) -> str:
    """The stable code a program branches on (`--json` errors): the error's own `code` when it
    has one, else one named for its type."""
    own = getattr(error, "code", None)
    if isinstance(own, str) and own:
        return own
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return "FAILED"


_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (ManifestError, "MANIFEST_INVALID"),
    (BootError, "BOOT_FAILED"),
    (SessionLockedError, "SESSION_LOCKED"),
    (SessionPersistenceCorruptionError, "SESSION_CORRUPT"),
    (SessionPersistenceError, "SESSION_STORAGE_FAILED"),
    (OSError, "STORAGE_FAILED"),
)


def error_lines(error: BaseException) -> list[str]:
    """The message lines: one per manifest problem, otherwise the message on one line."""
    text = str(error) or type(error).__name__
    if isinstance(error, ManifestError):
        return [line for line in text.splitlines() if line.strip()]
    if isinstance(error, SessionLockedError | CliError):
        return [text]
    text = describe(error)
    if isinstance(error, BootError):
        return ["; ".join((text, *error.hints))]
    if type(error).__module__ == "builtins" and not isinstance(error, OSError):
        text = f"{type(error).__name__}: {text}"
    return [text]


def report(error: BaseException, *, debug: bool, json: bool = False) -> int:
    """Print `error` to stderr (with its traceback under `--debug`) and return its exit code;
    with `json`, also one `{"type":"error","code","message"}` line on stdout."""
    error = leaf(error)
    if debug:
        traceback.print_exception(error, file=sys.stderr)
    lines = error_lines(error)
    for line in lines:
        print(f"dsh: error: {line}", file=sys.stderr)
    if json:
        print_json_error(error_code(error), "\n".join(lines))
    return exit_code_of(error)


def print_json_error(code: str, message: str) -> None:
    """The `--json` error object on stdout: `{"type":"error","code","message"}`."""
    try:
        print(dumps({"type": "error", "code": code, "message": message}), flush=True)
    except BrokenPipeError:
        pass
