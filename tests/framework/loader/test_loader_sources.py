"""Manifests given as Python rows or YAML text: same validation, `<rows>`/`<manifest>` locations,
relative names against `base_dir` (default: the working folder)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loader_helpers import CONFIGURED, rec, write

from framework import ManifestError
from framework.loader import boot, check_manifest

pytestmark = pytest.mark.anyio
__all__ = ["rec"]

Rec = list[tuple[Any, ...]]

FUNCS = """
import loader_rec

def mounted(ctx, config):
    loader_rec.events.append(("function", config, ctx.base_dir))
"""

TEXT = """
- id: configured
  name: ./configured.py
  config: {port: 9090}
- id: function
  name: loader_src_funcs:mounted
  config: {a: 1}
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A plugin folder on sys.path, also the working folder."""
    write(tmp_path, "configured.py", CONFIGURED)
    write(tmp_path, "loader_src_funcs.py", FUNCS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("loader_src_funcs", None)


def rows() -> list[dict[str, Any]]:
    return [
        {"id": "configured", "name": "./configured.py", "config": {"port": 9090}},
        {"id": "function", "name": "loader_src_funcs:mounted", "config": {"a": 1}},
    ]


async def test_rows_boot_like_a_file_relative_to_the_working_folder(folder: Path, rec: Rec) -> None:
    async with boot(rows()):
        assert sorted(rec, key=str) == [("configured", 9090, "hi"), ("function", {"a": 1}, folder)]


async def test_yaml_text_boots_like_a_file(folder: Path, rec: Rec) -> None:
    async with boot(TEXT):
        assert sorted(rec, key=str) == [("configured", 9090, "hi"), ("function", {"a": 1}, folder)]


async def test_base_dir_replaces_the_working_folder(
    folder: Path,
    rec: Rec,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    async with boot(rows(), base_dir=folder):
        assert ("function", {"a": 1}, folder) in rec
    with pytest.raises(ManifestError, match="no such file or package"):
        async with boot(rows()):
            pass


async def test_paths_in_rows_become_strings(folder: Path, rec: Rec) -> None:
    async with boot([{"id": "f", "name": "loader_src_funcs:mounted", "config": {"at": folder}}]):
        assert rec == [("function", {"at": str(folder)}, folder)]


async def test_overlays_apply_to_rows_and_resolve_against_their_own_folder(
    folder: Path, rec: Rec, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("overlay")
    write(other, "configured.py", CONFIGURED.replace('"configured"', '"other"'))
    overlay = write(
        other,
        "overlay.yaml",
        """
        - {id: configured, disabled: true}
        - insert:
            - {id: other, name: ./configured.py, config: {port: 1}}
        """,
    )
    async with boot(rows(), [overlay]):
        assert ("other", 1, "hi") in rec  # the overlay folder's configured.py
        assert ("configured", 9090, "hi") not in rec


async def test_a_config_an_overlay_patches_in_resolves_against_the_overlay_s_folder(
    folder: Path, rec: Rec, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # `ctx.base_dir` is the folder of the file that wrote the row's config: a relative `file:`
    # an overlay sets is next to the overlay, not next to the manifest it patches.
    other = tmp_path_factory.mktemp("overlay")
    overlay = write(other, "overlay.yaml", "- {id: function, config: {file: script.yml}}\n")
    untouched = write(other, "name-only.yaml", "- {id: function, disabled: false}\n")
    async with boot(rows(), [overlay]):
        assert ("function", {"file": "script.yml"}, other) in rec
    rec.clear()
    async with boot(rows(), [untouched]):
        assert ("function", {"a": 1}, folder) in rec


def problems_of(*args: Any, **kwargs: Any) -> list[str]:
    return [str(problem) for problem in check_manifest(*args, **kwargs)]


def test_rows_are_validated_with_the_row_number_as_line(folder: Path) -> None:
    bad = [
        {"id": "a", "name": "loader_src_funcs:mounted"},
        {"id": "b", "nme": "typo"},
        {"id": "a", "name": "loader_src_funcs:mounted"},
    ]
    assert problems_of(bad) == [
        'failed to validate config file <rows>: 2:15: unknown field "nme" in entry b',
        'failed to validate config file <rows>: 3:3: duplicate id "a" (first at <rows>:1)',
    ]


def test_rows_resolution_and_config_problems_name_the_row(folder: Path) -> None:
    bad = [
        {"id": "c", "name": "./configured.py", "config": {"port": "eighty"}},
        {"id": "x", "name": "./missing.py"},
    ]
    problems = problems_of(bad)
    assert problems[0].startswith(
        f'cannot resolve plugin "./missing.py" for entry x (<rows>:2): no such file or package: '
        f"{folder / 'missing.py'}"
    )
    assert problems[1] == (
        "invalid config for entry c (<rows>:1):\n"
        "  - Input should be a valid integer, unable to parse string as an integer (at port)"
    )


def test_text_is_validated_with_its_own_lines(folder: Path) -> None:
    assert problems_of("- id: a\n  name: x\n  colour: red\n") == [
        'failed to validate config file <manifest>: 3:3: unknown field "colour" in entry a'
    ]
    assert problems_of("- id: a\n  name: [unclosed\n")[0].startswith(
        "failed to parse config file <manifest>: 3:1: "
    )


def test_the_top_level_must_be_a_list(folder: Path) -> None:
    expected = "failed to validate {0}: config file must be a top-level list"
    assert problems_of({"id": "a"}) == [expected.format("config file <rows>")]  # type: ignore[arg-type]
    assert problems_of("id: a\nname: b\n") == [expected.format("config file <manifest>")]
    assert problems_of([]) == []  # like an empty YAML list


def test_a_string_without_a_line_break_is_a_path(folder: Path) -> None:
    assert problems_of("- name: x") == [
        "failed to read config file - name: x: No such file or directory"
    ]


def test_rows_must_be_plain_data(folder: Path) -> None:
    with pytest.raises(TypeError) as caught:
        check_manifest([{"name": "x", "config": {"when": object()}}])
    assert str(caught.value) == (
        "manifest rows: row 1.config.when must be plain data (str, int, float, bool, None, a "
        "list or a mapping), got object"
    )
    with pytest.raises(TypeError, match=r"row 1\.config has a key that is not a string: 1"):
        check_manifest([{"name": "x", "config": {1: "a"}}])
    with pytest.raises(TypeError, match=r"row 2\.config\.ratio is nan, which has no YAML/JSON"):
        check_manifest([{"name": "x"}, {"name": "y", "config": {"ratio": float("nan")}}])


def test_base_dir_is_refused_for_a_file(folder: Path) -> None:
    manifest = write(folder, "app.yaml", TEXT)
    with pytest.raises(TypeError, match="base_dir is for a manifest given as text or rows"):
        check_manifest(manifest, base_dir=folder)
