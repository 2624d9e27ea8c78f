"""A library app: boot a persisted agent from Python rows, run a turn, stream the next one.

    python examples/library_app.py

The model is the scripted replay model, so this runs offline and prints the same thing every
time. Sessions are JSONL files under `$DSH_HOME/sessions`; the example points `DSH_HOME` at a
temporary folder. Swap the `model` row for `dsh-llm-openai` to talk to a real model.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Annotated

import anyio
from pydantic import Field

from framework import boot
from plugins.agent import TextDelta, ToolCall, ToolResult, TurnEnd
from plugins.tools import tool

SCRIPT = [  # what the replay model answers, one item per model request
    {"tool_calls": [{"id": "call-1", "name": "forecast", "arguments": {"city": "Lisbon"}}]},
    {"text": "It will be sunny in Lisbon, 24 °C."},
    {"text": "Pack sunglasses."},
]

ROWS = [
    {"id": "sessions", "name": "dsh-session"},
    {"id": "persistence", "name": "dsh-session-persistence-jsonl"},
    {"id": "checkpoints", "name": "dsh-session-checkpoint-policy"},
    {"id": "llm", "name": "dsh-llm"},
    {"id": "model", "name": "dsh-llm-replay", "config": {"responses": SCRIPT}},
    {"id": "tools", "name": "dsh-tools"},
    {"id": "agent", "name": "dsh-agent", "config": {"provider": "replay", "model": "replay"}},
]


@tool(read_only=True)
async def forecast(city: Annotated[str, Field(description="A city name.")]) -> dict[str, object]:
    """Tomorrow's weather for a city."""
    return {"city": city, "sky": "sunny", "celsius": 24}


async def main() -> None:
    async with boot(ROWS) as ctx:
        ctx.tools.register(forecast)

        result = await ctx.agents.run("What's the weather in Lisbon?", session="trip")
        print(f"session {result.session_id}, turn {result.turn}: {result.reason['kind']}")
        for run in result.tool_calls:
            value = run.result.text if run.result else "(no result)"
            print(f"  tool {run.call.name}({json.dumps(run.call.arguments)}) -> {value}")
        print(f"  answer: {result.text}")
        print(f"  tokens: {result.usage.input_tokens} in, {result.usage.output_tokens} out")

        print("streaming turn 2:", end=" ")
        async for item in ctx.agents.stream("Anything to pack?", session="trip"):
            if isinstance(item, TextDelta):
                print(item.text, end="", flush=True)
            elif isinstance(item, ToolCall | ToolResult):
                print(f"[{type(item).__name__}]", end="")
            elif isinstance(item, TurnEnd):
                print(f" ({item.result.reason['kind']})")

        stored = await ctx.sessionPersistence.read_from("trip", 0)
        print(f"stored: {len(stored)} events, last {stored[-1]['type']}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as home:
        os.environ["DSH_HOME"] = home
        anyio.run(main)
