"""Binding names of the framework's public API: what manifests, apps and acceptance
checks import from `framework` itself."""

from __future__ import annotations

import framework
import framework.loader
from framework import FiberState


def test_boot_and_check_manifest_are_exported_from_the_package() -> None:
    assert framework.boot is framework.loader.boot
    assert framework.check_manifest is framework.loader.check_manifest
    assert {"boot", "check_manifest"} <= set(framework.__all__)


def test_binding_names_exist() -> None:
    for name in (
        "Context",
        "FiberState",
        "Service",
        "AbortController",
        "AbortSignal",
        "FrameworkError",
        "ServiceError",
        "BootError",
        "ManifestError",
        "PluginError",
    ):
        assert name in framework.__all__
        assert getattr(framework, name).__name__ == name
    for error in ("ServiceError", "BootError", "ManifestError", "PluginError"):
        assert issubclass(getattr(framework, error), framework.FrameworkError)
    assert {s.name for s in FiberState} == {
        "PENDING",
        "LOADING",
        "ACTIVE",
        "FAILED",
        "DISPOSED",
        "UNLOADING",
    }
