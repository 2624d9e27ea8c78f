"""The event the `llm` service dispatches (docs/writing-plugins.md, "Events")."""

from __future__ import annotations

from collections.abc import AsyncIterable

from framework import Waterfall

from .types import GenerateOptions, StreamChunk

__all__ = ["STREAM"]

STREAM: Waterfall[GenerateOptions, AsyncIterable[StreamChunk]] = Waterfall(
    "llm/stream",
    returns=AsyncIterable,
    error="llm/stream listener must return an async iterable",
)
"""`(options, next)` around the adapter: a sync callable returning (a wrapper of) `next()`, or
an async generator function. Lazy: nothing downstream exists until iteration reaches it."""
