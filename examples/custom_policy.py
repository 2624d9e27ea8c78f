"""A custom policy mounted by path: with it, a tool body only starts once its call is durable.

    python examples/custom_policy.py

The persistence backend is configured to write behind lazily (a minute), so only explicit
flushes reach the disk. The tool checks the stored log from inside its body: without the policy
its own `tool/call` is not there yet; with `policies/dispatch_barrier.py` mounted it is.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio

from framework import boot
from plugins.tools import ToolExecution, tool

HERE = Path(__file__).parent
SCRIPT = [
    {
        "tool_calls": [
            {"id": "call-1", "name": "send_email", "arguments": {"to": "ops@example.com"}}
        ]
    },
    {"text": "Sent."},
]


def rows(with_policy: bool) -> list[dict[str, Any]]:
    lazy = {"writeBatchMaxDelayMs": 60_000}
    return [
        {"id": "sessions", "name": "dsh-session"},
        {"id": "persistence", "name": "dsh-session-persistence-jsonl", "config": lazy},
        {
            "id": "checkpoints",
            "name": "./policies/dispatch_barrier.py",  # relative to base_dir
            "config": {"announce": True},
            "disabled": not with_policy,
        },
        {"id": "llm", "name": "dsh-llm"},
        {"id": "model", "name": "dsh-llm-replay", "config": {"responses": SCRIPT}},
        {"id": "tools", "name": "dsh-tools"},
        {"id": "agent", "name": "dsh-agent", "config": {"provider": "replay", "model": "replay"}},
    ]


@tool
async def send_email(to: str, exec: ToolExecution) -> str:
    """Send an email (this one only pretends)."""
    assert exec.agent is not None
    persistence = exec.agent.ctx.get("sessionPersistence")
    session_id = exec.agent.session.id
    written = any(header["id"] == session_id for header in await persistence.list())
    stored = await persistence.read_from(session_id, 0) if written else []
    durable = any(e["type"] == "tool/call" and e["data"]["callId"] == exec.call_id for e in stored)
    print(f"  tool body: its tool/call is durable: {durable}")
    return f"sent to {to}"


async def main() -> None:
    for with_policy in (False, True):
        print("with the policy:" if with_policy else "without a policy:")
        async with boot(rows(with_policy), base_dir=HERE) as ctx:
            ctx.tools.register(send_email)
            result = await ctx.agents.run("Tell ops the deploy is done.")
            outcome = result.tool_calls[0].result
            print(f"  tool result: {outcome.text if outcome else '-'}")
            print(f"  turn: {result.reason['kind']}, answer: {result.text}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as home:
        os.environ["DSH_HOME"] = home
        anyio.run(main)
