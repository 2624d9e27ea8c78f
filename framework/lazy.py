"""Lazy package attributes: a package names the module of each public name, and the name's
module is imported the first time the name is read (docs/performance.md, "Start-up (P11)")."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `homes` maps each lazy name to its submodule (a
    name mapped to itself is that submodule); a name read once is kept in the package, so the
    hook runs only on first use."""

    def __getattr__(attribute: str) -> Any:
        home = homes.get(attribute)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
        module = importlib.import_module(f".{home}", package)
        value = module if home == attribute else getattr(module, attribute)
        setattr(sys.modules[package], attribute, value)
        return value

    return __getattr__
