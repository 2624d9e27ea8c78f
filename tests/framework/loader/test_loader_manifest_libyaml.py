"""Manifests are composed by libyaml where it agrees with ruamel's pure-Python parser, and by the
pure parser otherwise (docs/performance.md, "Start-up (P11)"): the rows are the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest

import framework.manifest as manifest_module
from framework.manifest import _MAX_DEPTH, _libyaml_agrees, load_manifest

CONFIG = Path(__file__).parents[3] / "config"
OVERLAYS = sorted((CONFIG / "overlays").glob("*.yml"))


def test_the_default_manifest_takes_the_libyaml_path() -> None:
    assert _libyaml_agrees((CONFIG / "app.yml").read_text("utf-8"))


@pytest.mark.parametrize("overlay", [None, *OVERLAYS], ids=lambda p: getattr(p, "name", "none"))
def test_libyaml_and_the_pure_parser_read_the_same_rows(
    overlay: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    patches = [] if overlay is None else [overlay]
    fast = load_manifest(CONFIG / "app.yml", patches)
    monkeypatch.setattr(manifest_module, "_CPARSER", None)
    pure = load_manifest(CONFIG / "app.yml", patches)
    assert fast[0] is not None
    assert repr(fast) == repr(pure)


@pytest.mark.parametrize(
    "text",
    [
        "- id: a\n  name: b\n  config:\t1\n",  # a tab libyaml accepts, the pure parser not
        "%YAML 1.1\n---\n- id: a\n  name: b\n",  # libyaml would ignore the version
        "- " + "[" * (_MAX_DEPTH + 1) + "]" * (_MAX_DEPTH + 1) + "\n",  # its composer recurses
        "- id: a\n  name: [b\n",  # a problem: reported in the pure parser's words
    ],
)
def test_what_libyaml_may_read_differently_goes_through_the_pure_parser(text: str) -> None:
    assert not _libyaml_agrees(text)


def test_a_composer_error_is_reported_by_the_pure_parser() -> None:
    # libyaml refuses a reused anchor, the pure parser warns and reads it: the pure one decides.
    text = "- &a {id: a, name: b}\n- &a {id: c, name: d}\n"
    assert _libyaml_agrees(text)
    with pytest.warns(Warning, match="duplicate anchor"):
        manifest, problems = load_manifest("<m>", text=text)
    assert problems == []
    assert manifest is not None
    assert [e.id for e in manifest.entries] == ["a", "c"]
