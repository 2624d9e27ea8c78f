"""`dispatch()` builds only the command its line names (typer builds each command from its
signature on every start: docs/performance.md, "Start-up (P11)"), and that command's help is
the one the whole group gives."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import typer.main

from apps.cli.commands import _command_name, app, dispatch

NAMES = [_command_name(info) for info in app.registered_commands]


def _help(capsys: pytest.CaptureFixture[str], call: Callable[[], Any]) -> str:
    with pytest.raises(SystemExit) as exit:
        call()
    assert exit.value.code == 0
    return capsys.readouterr().out


def test_every_command_has_one_name() -> None:
    assert len(set(NAMES)) == len(NAMES)
    assert None not in NAMES


def test_a_named_command_is_the_only_one_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str | None] = []
    real = typer.main.get_command_from_info

    def counting(command_info: Any, **kwargs: Any) -> Any:
        built.append(_command_name(command_info))
        return real(command_info, **kwargs)

    monkeypatch.setattr(typer.main, "get_command_from_info", counting)
    monkeypatch.setattr(sys, "argv", ["dsh", "sessions", "--help"])
    with pytest.raises(SystemExit):
        dispatch()
    assert built == ["sessions"]


@pytest.mark.parametrize("name", NAMES)
def test_a_command_s_help_is_the_whole_group_s(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    whole = _help(capsys, lambda: app([name, "--help"], prog_name="dsh"))
    monkeypatch.setattr(sys, "argv", ["dsh", name, "--help"])
    assert _help(capsys, dispatch) == whole
