"""Errors raised by the agent runtime."""

from __future__ import annotations

from plugins.llm import HarnessError


class AgentError(HarnessError):
    """Raised when an agent cannot be created, resumed or driven as asked (`.code` says why)."""
