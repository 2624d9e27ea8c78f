"""docs/configuration.md is what `python -m apps.config_reference` prints, for every plugin."""

from __future__ import annotations

from pathlib import Path

from apps.config_reference import render
from framework.loader import plugin_entry_points

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run `python -m apps.config_reference > "
        "docs/configuration.md`"
    )


def test_every_first_party_plugin_has_a_section() -> None:
    page = render()
    first_party = [n for n, ep in plugin_entry_points().items() if ep.value.startswith("plugins.")]
    assert first_party
    for name in first_party:
        assert f"## `{name}`\n" in page
