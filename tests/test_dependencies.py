"""Every module the shipped packages import is the standard library's, the project's own, or a
distribution `pyproject.toml` declares (a package that happens to be installed beside a dev
dependency does not count: a user's fresh install would not have it)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("framework", "plugins", "apps")
#: Extras a module may need, by the package it lives in (imported only when that part is used).
EXTRAS = {"plugins/session_persistence_postgres": "postgres"}
#: Imported only when it is already running the program (anyio on trio).
RUNTIME_ONLY = {"trio"}
#: Distributions that come with, and are pinned by, a declared one (pydantic's core types).
COMES_WITH = {"pydantic-core": "pydantic"}


def _names(requirements: list[str]) -> set[str]:
    names = (re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0] for r in requirements)
    return {name.lower().replace("_", "-") for name in names}


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {name: _names(reqs) for name, reqs in project["optional-dependencies"].items()}
    return _names(project["dependencies"]), extras


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    base, extras = _declared()
    owners = packages_distributions()
    own = set(SHIPPED)
    missing = []
    for package in SHIPPED:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if "/testing/" in relative:
                continue  # test support shipped for plugin authors; it may use test extras
            allowed = set(base)
            for prefix, extra in EXTRAS.items():
                if relative.startswith(prefix):
                    allowed |= extras[extra]
            for module in _imports(path) - own - RUNTIME_ONLY:
                if module in sys.stdlib_module_names or module == "__future__":
                    continue
                dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
                dists |= {COMES_WITH[d] for d in dists if d in COMES_WITH}
                if not dists & allowed:
                    missing.append(f"{relative}: {module} ({', '.join(sorted(dists)) or '?'})")
    assert not missing, "undeclared imports:\n" + "\n".join(missing)
