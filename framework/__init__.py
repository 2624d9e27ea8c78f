"""A small Cordis-style context and service container (docs/concepts.md)."""

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
from framework.hooks import Bail, Emit, Event, ListenerResultError, Parallel, Serial, Waterfall
from framework.loader import boot, check_manifest
from framework.service import Service, ServiceKey
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
    "Bail",
    "BootError",
    "ConfigError",
    "Context",
    "DshError",
    "Effect",
    "Emit",
    "Event",
    "Fiber",
    "FiberState",
    "FrameworkError",
    "ListenerResultError",
    "ManifestError",
    "Parallel",
    "PluginError",
    "Scope",
    "Serial",
    "Service",
    "ServiceError",
    "ServiceKey",
    "TimeoutReason",
    "Waterfall",
    "abort_scope",
    "boot",
    "check_manifest",
    "deadline",
    "timeout_of",
]
