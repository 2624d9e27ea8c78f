"""Where a manifest comes from: a file, YAML text, or rows given as Python data.

`boot` and `check_manifest` accept all three (docs/python-api.md). Text and rows are read by the
same YAML reader as a file, so they get the same validation and messages; their locations are
`<manifest>:<line>` (lines of the text) and `<rows>:<n>` (the n-th top-level row), and relative
plugin paths in them resolve against `base_dir`, by default the working folder at the call.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

TEXT: Final = "<manifest>"
"""The location label of a manifest given as YAML text."""
ROWS: Final = "<rows>"
"""The location label of a manifest given as rows (line n is the n-th top-level row)."""

ManifestInput = str | os.PathLike[str] | Sequence[Mapping[str, Any]]
"""A manifest file's path, YAML text (a `str` with a line break) or a list of row mappings."""


@dataclass(frozen=True)
class ManifestSource:
    """A manifest ready for the reader: its label, its text (None: read the file) and the
    folder its relative names resolve against."""

    label: str
    text: str | None
    base_dir: Path | None

    def folder_of(self, path: str) -> Path:
        """The folder relative names resolve against for a row read from `path` (an overlay's
        rows use the overlay's folder)."""
        if self.base_dir is not None and path == self.label:
            return self.base_dir
        return Path(path).parent


def manifest_source(
    manifest: ManifestInput, base_dir: str | os.PathLike[str] | None = None
) -> ManifestSource:
    """Classify `manifest`. Raises `TypeError` for `base_dir` with a file, or rows that are not
    plain data (naming the row and the field)."""
    if (isinstance(manifest, str) and "\n" not in manifest) or isinstance(manifest, os.PathLike):
        if base_dir is not None:
            raise TypeError(
                "base_dir is for a manifest given as text or rows: a file's rows resolve "
                "against the file's folder"
            )
        return ManifestSource(str(manifest), None, None)
    folder = Path(base_dir if base_dir is not None else os.getcwd()).resolve()
    if isinstance(manifest, str):
        return ManifestSource(TEXT, manifest, folder)
    return ManifestSource(ROWS, _rows_text(manifest), folder)


def _rows_text(rows: object) -> str:
    """YAML whose line n holds row n (as JSON, a YAML subset), or one document for a non-list."""
    if not isinstance(rows, list | tuple):
        return json.dumps(_plain(rows, "the manifest"), ensure_ascii=True)
    if not rows:
        return "[]"
    lines = [
        "- " + json.dumps(_plain(row, f"row {index}"), ensure_ascii=True)
        for index, row in enumerate(rows, 1)
    ]
    return "\n".join(lines) + "\n"


def _plain(value: Any, at: str) -> Any:
    """`value` as JSON-ready data; paths become strings."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"manifest rows: {at} has a key that is not a string: {key!r}")
            out[key] = _plain(item, f"{at}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [_plain(item, f"{at}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"manifest rows: {at} is {value!r}, which has no YAML/JSON form")
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(
        f"manifest rows: {at} must be plain data (str, int, float, bool, None, a list or a "
        f"mapping), got {type(value).__name__}"
    )
