"""The framework's exception hierarchy and pydantic error formatting."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

Location = tuple[str | int, ...]
Problem = tuple[str, Location]


class DshError(Exception):
    """Root of the project's errors: `code` is stable (programs branch on it or on the type),
    the message is for people."""

    code: str = "DSH_ERROR"


class FrameworkError(DshError):
    """Base class of every error raised by the framework."""

    code: str = "FRAMEWORK_ERROR"


class ServiceError(FrameworkError):
    """A service was read, provided or injected incorrectly."""


class PluginError(FrameworkError):
    """A plugin could not be recognised or applied."""


class ConfigError(PluginError):
    """A plugin's raw config did not validate against its `Config` model."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("invalid config:\n" + format_problems(self.problems))


class ManifestError(FrameworkError):
    """A manifest or overlay file is malformed or names something that cannot be resolved."""

    code = "MANIFEST_INVALID"


class BootError(FrameworkError):
    """Booting a manifest left rows failed or still waiting for services."""

    code = "BOOT_FAILED"

    def __init__(self, message: str, hints: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: How to provide each awaited service no row provides (kept out of the message).
        self.hints = hints


def validation_problems(exc: ValidationError) -> list[Problem]:
    """One `(message, location)` pair per problem of a pydantic `ValidationError`."""
    return [(str(err["msg"]), tuple(err["loc"])) for err in exc.errors()]


def dotted(loc: Location) -> str:
    """Render a pydantic location as `a.b.0`; the empty location (the whole value) is `<root>`."""
    return ".".join(str(part) for part in loc) if loc else "<root>"


def format_problems(problems: Sequence[Problem]) -> str:
    """The `  - <message> (at <dotted.path>)` lines, joined by newlines (no trailing newline)."""
    return "\n".join(f"  - {message} (at {dotted(loc)})" for message, loc in problems)
