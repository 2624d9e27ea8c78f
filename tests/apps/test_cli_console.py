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
    ("tty_compatible", "force_color", "out_tty", "err_tty"),
    list(itertools.product([UNSET, "0", "1", "x"], [UNSET, "", "1"], *[[False, True]] * 2)),
)
def test_pipes_and_terminals_are_told_as_rich_tells_them(
    monkeypatch: pytest.MonkeyPatch,
    tty_compatible: str | None,
    force_color: str | None,
    out_tty: bool,
    err_tty: bool,
) -> None:
    for name, value in (("TTY_COMPATIBLE", tty_compatible), ("FORCE_COLOR", force_color)):
        if value is UNSET:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    stdout = Tty() if out_tty else io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", Tty() if err_tty else io.StringIO())
    out = Console()
    deco = out if out.is_terminal else Console(stderr=True)
    assert Consoles().interactive == deco.is_terminal
    plain = Consoles().plain()
    if out.is_terminal:
        assert plain is None
    else:
        assert plain == (stdout, PIPE_WIDTH)


def test_a_given_console_is_asked() -> None:
    out = io.StringIO()
    assert Consoles(Console(file=out, width=60)).plain() == (out, 60)
    assert Consoles(Console(file=out, force_terminal=True)).plain() is None
