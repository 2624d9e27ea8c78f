"""The `-c` default: `$DSH_CONFIG`, else the packaged `config/app.yml`, else the repository's."""

from __future__ import annotations

from pathlib import Path

from apps.cli.paths import PACKAGE_DIR, default_manifest


def test_environment_variable_wins(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "app.yml").write_text("[]\n")
    chosen = default_manifest({"DSH_CONFIG": "/etc/dsh.yml"}, tmp_path)
    assert chosen == Path("/etc/dsh.yml")


def test_packaged_config_next_to_the_package(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "app.yml").write_text("[]\n")
    assert default_manifest({"DSH_CONFIG": ""}, tmp_path) == tmp_path / "config" / "app.yml"


def test_repository_config_in_an_editable_install(tmp_path: Path) -> None:
    package = tmp_path / "apps" / "cli"
    package.mkdir(parents=True)
    assert default_manifest({}, package) == tmp_path / "config" / "app.yml"


def test_this_checkout_resolves_to_its_config() -> None:
    chosen = default_manifest({})
    assert chosen.is_file()
    assert chosen == PACKAGE_DIR.parents[1] / "config" / "app.yml"
