"""Case 16 and the shipped manifests: mount, omit or replace the policy per deployment."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from framework import AbortController, Context
from framework.loader import boot, check_manifest
from plugins.llm import GenerateOptions, chunks
from plugins.tools import Tool, ToolExecutionInput

pytestmark = pytest.mark.anyio

CONFIG = Path(__file__).parents[3] / "config"

APP = """\
- id: sessions
  name: dsh-session
- id: session-persistence
  name: dsh-session-persistence-jsonl
  config: {root: ROOT, compression: none, write_batch_max_delay_ms: 60000}
- id: session-checkpoints
  name: dsh-session-checkpoint-policy
- id: llm
  name: dsh-llm
- id: tools
  name: dsh-tools
"""

CUSTOM_POLICY = """\
name = "custom-checkpoints"
inject = ["sessions", "tools"]

ORDER = []


def apply(ctx, config):
    async def before_dispatch(exec, next):
        ORDER.append("custom")
        await ctx.sessions.flush(exec.agent.session)
        return await next()

    ctx.on("tools/execute", before_dispatch)
"""

OVERLAY = """\
- id: session-checkpoints
  disabled: true
- insert:
    - id: custom-checkpoints
      name: ./custom_policy.py
"""


class Adapter:
    async def stream(self, options: Any) -> AsyncIterator[dict[str, Any]]:
        yield chunks.finish(chunks.stop_reason("stop"))


@asynccontextmanager
async def deployment(tmp_path: Path, patches: Sequence[Path] = ()) -> AsyncIterator[Any]:
    app = tmp_path / "app.yml"
    app.write_text(APP.replace("ROOT", str(tmp_path / "sessions")))
    async with boot(app, patches) as ctx:
        flushes: list[str] = []
        ctx.on("session/flush", lambda s: flushes.append(s.id))
        ctx.llm.register_adapter("probe", Adapter())

        async def body(args: Any, exec: Any) -> Any:
            return None

        ctx.tools.register(
            Tool(name="probe", description="probe", parameters={"type": "object"}, execute=body)
        )
        session = ctx.sessions.create("live", meta={"cwd": str(tmp_path)})
        yield SimpleNamespace(ctx=ctx, flushes=flushes, session=session)


async def stream(d: Any) -> None:
    options = GenerateOptions(provider="probe", model="m", messages=[], session_id=d.session.id)
    async for _ in d.ctx.llm.stream(options):
        pass


async def call(d: Any) -> Any:
    agent = SimpleNamespace(ctx=d.ctx, session=d.session)
    return await d.ctx.tools.execute(
        ToolExecutionInput(
            call_id="c1", name="probe", arguments={}, signal=AbortController().signal, agent=agent
        )
    )


async def pre_step(d: Any) -> None:
    agent = SimpleNamespace(ctx=d.ctx, session=d.session)
    payload = SimpleNamespace(agent=agent, messages=[], turn=1, step=1, signal=None)

    async def enter() -> None:
        return None

    await d.ctx.waterfall("agent/pre-step", payload, inner=enter)


async def test_16_base_manifest_checkpoints_the_request(tmp_path: Path) -> None:
    async with deployment(tmp_path) as d:
        await stream(d)
        assert d.flushes == ["live"]


async def test_16_overlay_replaces_the_policy_with_a_deployment_file(tmp_path: Path) -> None:
    (tmp_path / "custom_policy.py").write_text(CUSTOM_POLICY)
    overlay = tmp_path / "replace.yml"
    overlay.write_text(OVERLAY)
    async with deployment(tmp_path, [overlay]) as d:
        assert d.ctx.listeners("llm/stream") == ()  # no session-checkpoint-policy fiber
        await stream(d)
        assert d.flushes == []
        result = await call(d)
        assert result.is_error is False
        assert d.flushes == ["live"]
        (custom,) = d.ctx.listeners("tools/execute")
        assert custom.__module__.endswith("custom_policy")
        assert custom.__globals__["ORDER"] == ["custom"]


async def test_no_checkpoints_overlay_omits_every_barrier(tmp_path: Path) -> None:
    async with deployment(tmp_path, [CONFIG / "overlays" / "no-checkpoints.yml"]) as d:
        await stream(d)
        await call(d)
        await pre_step(d)
        assert d.flushes == []


async def test_strict_overlay_swaps_in_the_strict_variant(tmp_path: Path) -> None:
    async with deployment(tmp_path, [CONFIG / "overlays" / "strict-checkpoints.yml"]) as d:
        await stream(d)
        await call(d)
        await pre_step(d)
        assert d.flushes == ["live", "live", "live"]


def test_shipped_manifests_are_clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    monkeypatch.setenv("DSH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    app = CONFIG / "app.yml"
    assert check_manifest(app) == []
    for overlay in sorted((CONFIG / "overlays").glob("*.yml")):
        assert check_manifest(app, [overlay]) == [], overlay.name
    assert check_manifest(app, [CONFIG / "examples" / "replace-policy.yml"]) == []


async def test_seed_snippet_loads_verbatim(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The seed's two rows, unchanged, beside the services they need (added by an overlay).
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    overlay = tmp_path / "services.yml"
    overlay.write_text(
        "- insert:\n"
        "    - {id: sessions, name: dsh-session}\n"
        "    - {id: llm, name: dsh-llm}\n"
        "    - {id: tools, name: dsh-tools}\n"
    )
    async with boot(CONFIG / "seed-policy.yml", [overlay]) as ctx:
        assert ctx.get("sessionPersistence") is not None
        assert len(ctx.listeners("llm/stream")) == 1
        assert len(ctx.listeners("tools/execute")) == 1
        assert len(ctx.listeners("agent/pre-step")) == 1


async def test_default_app_boots_with_the_policy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    ctx: Context
    async with boot(CONFIG / "app.yml") as ctx:
        for service in ("sessions", "llm", "tools", "agents", "sessionPersistence"):
            assert ctx.get(service) is not None, service
        # The approval plugin listens to agent/pre-step too; the policy's barrier is there once.
        listeners = ctx.listeners("agent/pre-step")
        assert [f.__qualname__.split(".")[0] for f in listeners].count("_step_barrier") == 1
