"""`Consoles.plain` tells a pipe from a terminal without rich where it surely can, and always
as rich does (docs/performance.md, "Start-up (P11)")."""

from __future__ import annotations

import io
import itertools
import sys

import pytest
from rich.console import Console

from apps.cli.console import PIPE_WIDTH, Consoles

UNSET = None


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("tty_compatible", "force_color", "tty"),
    list(itertools.product([UNSET, "0", "1", "x"], [UNSET, "", "1"], [False, True])),
)
def test_plain_output_is_what_rich_calls_no_terminal(
    monkeypatch: pytest.MonkeyPatch,
    tty_compatible: str | None,
    force_color: str | None,
    tty: bool,
) -> None:
    for name, value in (("TTY_COMPATIBLE", tty_compatible), ("FORCE_COLOR", force_color)):
        if value is UNSET:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    stdout = Tty() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    plain = Consoles().plain()
    if Console().is_terminal:
        assert plain is None
    else:
        assert plain == (stdout, PIPE_WIDTH)


def test_a_given_console_is_asked() -> None:
    out = io.StringIO()
    assert Consoles(Console(file=out, width=60)).plain() == (out, 60)
    assert Consoles(Console(file=out, force_terminal=True)).plain() is None
