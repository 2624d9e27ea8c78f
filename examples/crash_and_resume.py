"""Crash and resume: SIGKILL a process in the middle of a tool call, then resume its session.

    python examples/crash_and_resume.py

A child process runs an agent whose tool hangs after it has started (think: a payment request
on the wire). The parent kills the child with SIGKILL, the way a power cut or the OOM killer
would, then boots the same app and runs a new turn on the session. Loading the session repairs
it: the interrupted call gets a result saying its outcome is unknown, the interrupted turn is
closed, and the model answers the next prompt knowing both.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from typing import Any

import anyio

from framework import boot
from plugins.tools import ToolExecution, tool

SESSION = "transfer-1"
CHILD_SCRIPT = [{"tool_calls": [{"id": "call-1", "name": "transfer", "arguments": {"cents": 100}}]}]
RESUMED_SCRIPT = [{"text": "Its outcome is unknown: I will ask the bank before sending it again."}]


def rows(script: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": "sessions", "name": "dsh-session"},
        {"id": "persistence", "name": "dsh-session-persistence-jsonl"},
        {"id": "checkpoints", "name": "dsh-session-checkpoint-policy"},
        {"id": "llm", "name": "dsh-llm"},
        {"id": "model", "name": "dsh-llm-replay", "config": {"responses": script}},
        {"id": "tools", "name": "dsh-tools"},
        {"id": "agent", "name": "dsh-agent", "config": {"provider": "replay", "model": "replay"}},
    ]


STARTED = b"transfer started\n"


@tool
async def transfer(cents: int, exec: ToolExecution) -> str:
    """Send money to Bob."""
    sys.stdout.buffer.write(STARTED)  # tell the parent the body is running
    sys.stdout.flush()
    await anyio.sleep_forever()  # ... and hang here until killed
    return "sent"


async def child() -> None:
    async with boot(rows(CHILD_SCRIPT)) as ctx:
        ctx.tools.register(transfer)
        await ctx.agents.run("Send Bob one dollar.", session=SESSION)


async def parent() -> None:
    async with await anyio.open_process([sys.executable, __file__, "--child"]) as process:
        assert process.stdout is not None
        output = b""
        with anyio.fail_after(60):
            async for chunk in process.stdout:
                output += chunk
                if STARTED in output:
                    break
        process.send_signal(signal.SIGKILL)
        await process.wait()
    print(f"child killed by signal {-process.returncode} while transfer() was running")

    async with boot(rows(RESUMED_SCRIPT)) as ctx:
        ctx.tools.register(transfer)
        result = await ctx.agents.run("Did the transfer go through?", session=SESSION)
        agent = ctx.agents.get(SESSION)
        assert agent is not None
        for event in agent.session.events:
            data = event["data"]
            if event["type"] == "tool/result":
                text = data["message"]["content"][0]["content"][0]["text"]
                print(f"repaired {data['error']['code']}: {text.split('. ')[0]}.")
            elif event["type"] == "turn/end":
                print(f"turn {data['turn']} ended: {data['reason']['kind']}")
        print(f"the model now says: {result.text}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        anyio.run(child)
    else:
        with tempfile.TemporaryDirectory() as home:
            os.environ["DSH_HOME"] = home  # the child inherits it
            anyio.run(parent)
