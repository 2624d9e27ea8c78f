"""Provider routes: adapter registrations, their validation and handles (docs/models.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plugins.llm.adapter import LlmAdapter
from plugins.llm.errors import LlmError
from plugins.llm.retry import RetryPolicy
from plugins.llm.types import ProviderInfo


@dataclass(frozen=True)
class Route:
    """One provider served by one adapter registration."""

    provider: str
    adapter: LlmAdapter
    info: ProviderInfo
    retry_policy: RetryPolicy
    registration: Registration


class Registration:
    """The routes of one `register_adapter` call; owned by the registering plugin."""

    def __init__(self, routes: dict[str, Route], adapter: LlmAdapter) -> None:
        self._table = routes
        self.adapter = adapter
        self.providers: tuple[str, ...] = ()
        self.active = True

    def install(self, providers: Sequence[str]) -> None:
        """Validate `providers` against the other registrations, then swap this one's routes."""
        names = list(providers)
        built = build_routes(self._table, names, self)
        for name in self.providers:
            del self._table[name]
        self._table.update(built)
        self.providers = tuple(names)

    def dispose(self) -> None:
        """Remove this registration's routes (idempotent)."""
        if not self.active:
            return
        self.active = False
        for name in self.providers:
            if self._table.get(name) is not None and self._table[name].registration is self:
                del self._table[name]
        self.providers = ()


class AdapterHandle:
    """Returned by `register_adapter`: call it to dispose; `replace(providers)` swaps routes."""

    def __init__(self, registration: Registration, on_dispose: Callable[[], object]) -> None:
        self._registration = registration
        self._on_dispose = on_dispose

    def __call__(self) -> None:
        self._on_dispose()

    def __repr__(self) -> str:
        state = "active" if self._registration.active else "disposed"
        return f"<AdapterHandle {list(self._registration.providers)} {state}>"

    @property
    def providers(self) -> tuple[str, ...]:
        """The providers currently routed to this registration."""
        return self._registration.providers

    def replace(self, providers: str | Sequence[str]) -> None:
        """Route exactly `providers` to this adapter (all-or-nothing)."""
        if not self._registration.active:
            raise RuntimeError("cannot replace the routes of a disposed adapter registration")
        self._registration.install(provider_list(providers))


def provider_list(providers: str | Sequence[str]) -> list[str]:
    """A single provider name or a sequence of them, as a list."""
    return [providers] if isinstance(providers, str) else list(providers)


def build_routes(
    table: dict[str, Route], providers: list[str], registration: Registration
) -> dict[str, Route]:
    """Validate and build the routes of `registration` (raises `LlmError`, changes nothing)."""
    if not providers:
        raise LlmError("an adapter must register at least one provider", "INVALID_ADAPTER")
    if not all(isinstance(name, str) and name for name in providers):
        raise LlmError("adapter provider names must be non-empty", "INVALID_ADAPTER")
    seen: set[str] = set()
    for name in providers:
        current = table.get(name)
        if name in seen or (current is not None and current.registration is not registration):
            raise LlmError(
                f'an adapter for provider "{name}" is already registered', "DUPLICATE_ADAPTER"
            )
        seen.add(name)
    adapter = registration.adapter
    routes: dict[str, Route] = {}
    for name in providers:
        routes[name] = Route(
            name, adapter, _provider_info(adapter, name), _retry_policy(adapter, name), registration
        )
    return routes


def _provider_info(adapter: LlmAdapter, provider: str) -> ProviderInfo:
    describe: Any = getattr(adapter, "provider_info", None)
    if describe is None:
        return {"id": provider, "name": provider}
    info = describe(provider)
    if (
        not isinstance(info, dict)
        or info.get("id") != provider
        or not isinstance(info.get("name"), str)
        or not info["name"]
    ):
        raise LlmError(
            f'adapter metadata for provider "{provider}" must preserve its id and have a '
            "non-empty name",
            "INVALID_ADAPTER",
        )
    return {"id": provider, "name": info["name"]}


def _retry_policy(adapter: LlmAdapter, provider: str) -> RetryPolicy:
    policy_of: Any = getattr(adapter, "provider_retry_policy", None)
    policy = policy_of(provider) if policy_of is not None else None
    if policy is None:
        return RetryPolicy()
    if not isinstance(policy, RetryPolicy):
        raise TypeError(
            f'provider_retry_policy("{provider}") must return a RetryPolicy or None, '
            f"got {type(policy).__name__}"
        )
    return policy
