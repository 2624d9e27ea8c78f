"""The `dsh sessions` table: the plain layout is rich's borderless table, character for
character, whenever it fits; otherwise rich lays it out; cell texts are never markup."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from apps.cli import listing
from apps.cli.console import Consoles
from apps.cli.listing import COLUMNS, SessionRow, plain_lines, print_table

ROWS = [
    ("s-1", "2026-11-29 13:10:00", "12", "completed", "1043", "10,240 B", "idle", "Haiku"),
    ("long-session-id", "2026-11-29 13:10:01", "1", "interrupted", "6", "-", "waiting", ""),
    ("s-3", "2026-11-29 13:10:02", "0", "-", "0", "433 B", "-", "日本語のタイトル ✓"),
]


def _rich(table_rows: list[tuple[str, ...]], width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, soft_wrap=True, highlight=False, no_color=True)
    table = Table(box=None, pad_edge=False)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in listing.RIGHT else "left")
    for row in table_rows:
        table.add_row(*(Text(text) for text in row))
    console.print(table)
    return out.getvalue()


def test_plain_layout_is_what_rich_draws() -> None:
    lines = plain_lines([COLUMNS, *ROWS], 1000)
    assert lines is not None
    assert "".join(line + "\n" for line in lines) == _rich(ROWS, 1000)


def test_a_table_wider_than_the_line_or_a_control_character_is_left_to_rich() -> None:
    lines = plain_lines([COLUMNS, *ROWS[:2]], 1000)
    assert lines is not None
    widest = max(len(line) for line in lines)
    exact = plain_lines([COLUMNS, *ROWS[:2]], widest)
    assert exact is not None
    assert "".join(line + "\n" for line in exact) == _rich(ROWS[:2], widest)
    assert plain_lines([COLUMNS, *ROWS[:2]], widest - 1) is None
    broken = (*ROWS[0][:7], "two\nlines")
    assert plain_lines([COLUMNS, broken], 1000) is None


def _printed(rows: list[SessionRow], width: int) -> str:
    out = io.StringIO()
    print_table(Consoles(Console(file=out, width=width, soft_wrap=True, highlight=False)), rows)
    return out.getvalue()


def test_titles_are_shown_verbatim_not_as_markup() -> None:
    hostile = "[/x] :smile: [bold]y[/bold]"
    row = SessionRow("s-1", 1_700_000_000_000, None, title=hostile, state="idle")
    assert hostile in _printed([row], 1000)
    wrapped = _printed([row], 60)  # too narrow: rich's table, still verbatim
    assert "[/x]" in wrapped
    assert ":smile:" in wrapped


def test_on_a_terminal_the_plain_layout_keeps_the_row_styles() -> None:
    rows = [
        SessionRow("ok", 1_700_000_000_000, None, title="fine", state="idle"),
        SessionRow("bad", 1_700_000_000_000, None, problem="unreadable log"),
    ]
    out = io.StringIO()
    terminal = Console(file=out, width=200, force_terminal=True, color_system="standard")
    print_table(Consoles(terminal), rows)
    header, ok, bad = out.getvalue().splitlines()
    assert header.startswith("\x1b[1m")  # bold, as rich draws a table's header
    assert "\x1b[31m" in bad  # red: the log cannot be read
    assert "\x1b[" not in ok.replace("\x1b[0m", "")
    plain = _printed(rows, 200).splitlines()
    assert [Text.from_ansi(line).plain for line in (header, ok, bad)] == plain
