"""The `agents` service: creates, resumes and disposes agents; owns their drivers' task group."""

from __future__ import annotations

import builtins
import inspect
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Unpack

import anyio
from anyio.abc import TaskGroup

from framework import Scope, Service

from .agent import Agent
from .errors import AgentError
from .handle import AgentHandle
from .hooks import AGENT_CREATED, AGENT_DISPOSED, PARENT, SESSION_START, SessionStart
from .opening import Opened, resume_or_create
from .options import AgentOptions, Config
from .results import RunResult, StreamItem
from .run import Prompt, RunOptions, StreamOptions, run_turn_to_idle, stream_turn

if TYPE_CHECKING:
    from framework import AbortSignal, Context, Effect, Fiber
    from plugins.session import Session, SessionStore
    from plugins.tools import ToolsService

Setup = Callable[["Context"], object]
"""`setup(agent.ctx)`: registers the agent's listeners and tools; may be async."""


class TaskHost:
    """A task group that lives as long as the service: agents' drivers run in it.

    The plugin starts `run` with `ctx.start` (a task of its fiber in the root's task group).
    """

    def __init__(self) -> None:
        self._tg: TaskGroup | None = None
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold the task group open until `aclose()`."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await self._stop.wait()
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self._stopped.set()

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tg is None:
            raise RuntimeError("the agents service is not running")
        self._tg.start_soon(fn, *args)

    async def aclose(self) -> None:
        self._stop.set()
        await self._stopped.wait()


class AgentsService(Service):
    """`ctx.agents`: `create`, `resume`, `run`, `stream`, `get`, `list` and the default
    `AgentOptions`."""

    provide: ClassVar[str] = "agents"
    config: Config

    def __init__(self, ctx: Context, config: Config, host: TaskHost) -> None:
        super().__init__(ctx, config)
        self._host = host
        self._agents: dict[str, _Entry] = {}

    # The services below are read per step: `ctx.service(name)` reads with the rules of
    # `ctx.<name>` at about its cost (docs/performance.md, "Eighth round: reading a service").

    @property
    def tools(self) -> ToolsService:
        """The tools service as the agents plugin sees it."""
        tools: ToolsService = self.ctx.service("tools")
        return tools

    @property
    def sessions(self) -> SessionStore:
        """The session store."""
        sessions: SessionStore = self.ctx.service("sessions")
        return sessions

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a driver in the service's task group."""
        self._host.spawn(fn, *args)

    def default_options(self, preset: str | None = None) -> AgentOptions:
        """The configured defaults, overridden field by field by the named preset."""
        base = self.config.model_dump(include={"provider", "model", "system", "max_tokens"})
        if preset is not None:
            if preset not in self.config.agents:
                raise AgentError(f'unknown agent preset "{preset}"', "UNKNOWN_PRESET")
            base.update(self.config.agents[preset].model_dump(exclude_none=True))
        return AgentOptions(base["provider"], base["model"], base["max_tokens"], base["system"])

    def get(self, agent_id: str) -> Agent | None:
        """The registered agent with that id, or None."""
        entry = self._agents.get(agent_id)
        return None if entry is None else entry.agent

    def list(self) -> builtins.list[Agent]:
        """Registered agents in creation order."""
        return [entry.agent for entry in self._agents.values()]

    async def create(
        self,
        session_id: str | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        seed: builtins.list[dict[str, Any]] | None = None,
        agent_options: AgentOptions | None = None,
        signal: AbortSignal | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle:
        """Create a session and its agent; `setup(agent.ctx)` runs before anything is published."""
        session = self.sessions.prepare(session_id, seed=seed, meta=meta)
        return await self._mount(session, agent_options, signal, setup, "startup")

    async def resume(
        self,
        resume_session_id: str,
        *,
        agent_options: AgentOptions | None = None,
        signal: AbortSignal | None = None,
        setup: Setup | None = None,
    ) -> AgentHandle:
        """Load a stored session (repairing an interrupted turn) and drive it on."""
        persistence = self.ctx.get("sessionPersistence")
        if persistence is None:
            raise AgentError(
                f'cannot resume session "{resume_session_id}": no sessionPersistence service '
                "is available",
                "NO_PERSISTENCE",
            )
        preparation = await persistence.prepare(resume_session_id)
        try:
            return await self._mount(preparation.session, agent_options, signal, setup, "resume")
        finally:
            preparation.release()

    async def open(
        self,
        session: str | None = None,
        *,
        agent_options: AgentOptions | None = None,
        setup: Setup | None = None,
        meta: Mapping[str, Any] | None = None,
        create: bool = True,
    ) -> Opened:
        """The session's agent as `run()` opens it, with what opening did (docs/python-api.md):
        the live agent, else the stored session resumed, else a new session (unless `create`
        is false: then `SessionNotFoundError`)."""
        if session is not None:
            entry = self._agents.get(session)
            if entry is not None:
                return Opened(entry.agent, entry.dispose, "live")
        return await resume_or_create(
            self, session, agent_options=agent_options, setup=setup, meta=meta, create=create
        )

    async def run(self, prompt: Prompt, **options: Unpack[RunOptions]) -> RunResult:
        """Run one turn to idle on a new or existing session (docs/python-api.md)."""
        return await run_turn_to_idle(self, prompt, **options)

    def stream(
        self, prompt: Prompt, **options: Unpack[StreamOptions]
    ) -> AsyncGenerator[StreamItem, None]:
        """The same turn as typed items while it happens, `TurnEnd` last (docs/python-api.md)."""
        return stream_turn(self, prompt, **options)

    async def _mount(
        self,
        session: Session,
        agent_options: AgentOptions | None,
        signal: AbortSignal | None,
        setup: Setup | None,
        source: Literal["startup", "resume"],
    ) -> AgentHandle:
        options = agent_options if agent_options is not None else self.default_options()
        box: list[Agent] = []

        async def mount(ctx: Context, _config: object) -> None:
            agent = Agent(self, session, options, ctx.scoped(Scope()), stored=source == "resume")
            box.append(agent)
            if setup is not None:
                result = setup(agent.ctx)
                if inspect.isawaitable(result):
                    await result

        mount.__name__ = f"agent:{session.id}"
        fiber = self.ctx.plugin(mount)
        try:
            await fiber
            agent = box[0]
            if agent.id in self._agents:
                raise AgentError(f'agent "{agent.id}" is already registered', "DUPLICATE_AGENT")
            # Entered through the agent's context: the session entry is an effect of the agent's
            # fiber, undone after the guard below has stopped the driver.
            agent.ctx.sessions.enter(session)
            agent.ctx.sessions.announce(session)
            agent.ctx.effect(lambda: agent.stop)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await fiber.dispose()
            raise
        entry = _Entry(self, agent, fiber)
        self._agents[agent.id] = entry
        if signal is not None:
            entry.unlink = signal.add_listener(lambda _reason: agent.cancel(PARENT))
        entry.owner = self.caller.effect(lambda: entry.dispose)
        agent.ctx.emit(AGENT_CREATED, agent)
        agent.ctx.emit(SESSION_START, SessionStart(agent, source))
        return AgentHandle(agent, entry.dispose)

    async def aclose(self) -> None:
        """Dispose every agent (newest first), then stop the drivers' task group."""
        for entry in reversed(list(self._agents.values())):
            await entry.dispose()
        await self._host.aclose()


class _Entry:
    """A registered agent with its fiber; `dispose` is idempotent."""

    def __init__(self, service: AgentsService, agent: Agent, fiber: Fiber) -> None:
        self.service = service
        self.agent = agent
        self.fiber = fiber
        self.unlink: Callable[[], None] | None = None
        self.owner: Effect | None = None
        self._done = False

    async def dispose(self) -> None:
        if self._done:
            return
        self._done = True
        agent = self.agent
        if self.unlink is not None:
            self.unlink()
        if self.owner is not None:
            # Drop the owner's undo record without running it (this is that undo).
            self.owner.disposers.clear()
            self.owner()
        await agent.stop()
        await self.fiber.dispose()
        agent.ctx.emit(AGENT_DISPOSED, agent)
        self.service._agents.pop(agent.id, None)
