"""The error hierarchy and the pydantic problem formatting shared with the Loader."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from framework import (
    AbortError,
    BootError,
    ConfigError,
    FrameworkError,
    ManifestError,
    PluginError,
    ServiceError,
)
from framework.errors import dotted, format_problems, validation_problems


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    servers: list[Inner]


@pytest.mark.parametrize(
    "cls", [ServiceError, PluginError, ConfigError, ManifestError, BootError, AbortError]
)
def test_every_error_is_a_framework_error_with_a_docstring(cls: type[Exception]) -> None:
    assert issubclass(cls, FrameworkError)
    assert cls.__doc__
    assert "\n" not in cls.__doc__.strip()


def test_validation_problems_carry_message_and_location() -> None:
    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"servers": [{"port": "x"}, {"port": 1, "host": "h"}]})
    problems = validation_problems(info.value)
    assert problems == [
        (
            "Input should be a valid integer, unable to parse string as an integer",
            ("servers", 0, "port"),
        ),
        ("Extra inputs are not permitted", ("servers", 1, "host")),
    ]
    assert format_problems(problems) == (
        "  - Input should be a valid integer, unable to parse string as an integer"
        " (at servers.0.port)\n"
        "  - Extra inputs are not permitted (at servers.1.host)"
    )


def test_config_error_message_and_root_location() -> None:
    error = ConfigError([("Field required", ("servers",)), ("not a mapping", ())])
    assert str(error) == (
        "invalid config:\n  - Field required (at servers)\n  - not a mapping (at <root>)"
    )
    assert dotted(()) == "<root>"
