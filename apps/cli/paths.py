"""Where `dsh` finds its default manifest."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The package folder (`apps/cli`); a wheel force-includes the repository's `config/` here.
PACKAGE_DIR = Path(__file__).resolve().parent


def default_manifest(
    environ: Mapping[str, str] | None = None, package_dir: Path = PACKAGE_DIR
) -> Path:
    """The `-c` default: `$DSH_CONFIG` if set, else `config/app.yml` next to the package (a
    wheel install), else the repository's `config/app.yml` (an editable install)."""
    environ = os.environ if environ is None else environ
    configured = environ.get("DSH_CONFIG")
    if configured:
        return Path(configured)
    packaged = package_dir / "config" / "app.yml"
    if packaged.is_file():
        return packaged
    return package_dir.parent.parent / "config" / "app.yml"
