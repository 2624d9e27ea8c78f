"""What `@tool` reads from a docstring: the summary and a Google-style `Args:` section."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARGS_HEADINGS = frozenset({"Args", "Arguments", "Parameters"})
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class Docstring:
    """A docstring's first paragraph and its per-parameter descriptions."""

    summary: str
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(text: str | None) -> Docstring:
    """Split `text` into its summary (the first paragraph, lines joined by spaces) and the
    `name: description` entries of its `Args:` section (continuation lines joined)."""
    if not text:
        return Docstring("")
    lines = inspect.cleandoc(text).splitlines()
    paragraph: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line):
            break
        paragraph.append(line.strip())
    return Docstring(" ".join(paragraph), _args_section(lines))


def _args_section(lines: list[str]) -> dict[str, str]:
    params: dict[str, str] = {}
    inside = False
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        heading = _SECTION.match(line)
        if heading is not None and not line.startswith((" ", "\t")):
            inside = heading.group(1) in _ARGS_HEADINGS
            entry_indent, current = None, None
            continue
        if not inside or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            inside = False
            continue
        if entry_indent is None:
            entry_indent = indent
        entry = _ENTRY.match(line.strip()) if indent == entry_indent else None
        if entry is not None:
            current = entry.group(1)
            params[current] = entry.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return params
