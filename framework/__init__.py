"""A small Cordis-style context and service container (spec 01)."""

from framework.context import Context
from framework.errors import (
    BootError,
    ConfigError,
    DshError,
    FrameworkError,
    ManifestError,
    PluginError,
    ServiceError,
)
from framework.events import Scope
from framework.fiber import Effect, Fiber, FiberState
from framework.loader import boot, check_manifest
from framework.service import Service
from framework.signal import (
    AbortController,
    AbortError,
    AbortSignal,
    TimeoutReason,
    abort_scope,
    deadline,
    timeout_of,
)

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "BootError",
    "ConfigError",
    "Context",
    "DshError",
    "Effect",
    "Fiber",
    "FiberState",
    "FrameworkError",
    "ManifestError",
    "PluginError",
    "Scope",
    "Service",
    "ServiceError",
    "TimeoutReason",
    "abort_scope",
    "boot",
    "check_manifest",
    "deadline",
    "timeout_of",
]
