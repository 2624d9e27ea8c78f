"""`running(backend)`: a root Context with `sessions` and `sessionPersistence` over a backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import plugins.session as session_plugin
from framework import Context, Fiber
from plugins.session import SessionStore

from ..backend import JsonObject, PersistenceBackend
from ..config import Config
from ..service import SessionPersistenceService, mount_persistence
from .builders import meta
from .fakes import FakeClock, FaultInjector


@dataclass
class World:
    """A root Context with `sessions` and `sessionPersistence` over one backend instance."""

    ctx: Context
    service: SessionPersistenceService
    sessions: SessionStore
    backend: FaultInjector
    clock: FakeClock
    fiber: Fiber


@asynccontextmanager
async def running(
    backend: PersistenceBackend, clock: FakeClock | None = None
) -> AsyncIterator[World]:
    """Mount `sessions` and `sessionPersistence` (over `backend`, fault-injectable) in a root
    Context driven by a fake clock; leaving disposes everything."""
    clock = clock or FakeClock()
    injector = backend if isinstance(backend, FaultInjector) else FaultInjector(backend)

    async def persistence(ctx: Context, config: object) -> Any:
        return await mount_persistence(ctx, injector, Config(), clock=clock)

    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        fiber = ctx.plugin(persistence)
        await fiber
        yield World(ctx, ctx.sessionPersistence, ctx.sessions, injector, clock, fiber)


async def store(world: World, session_id: str, *batches: list[JsonObject], **extra: Any) -> None:
    await world.service.create(meta(session_id, **extra))
    for batch in batches:
        await world.service.append(session_id, batch)
