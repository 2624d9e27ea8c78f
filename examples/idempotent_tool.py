"""A tool from a typed function that applies its side effect once per idempotency key.

    python examples/idempotent_tool.py

`charge` is an ordinary async function; `@tool` derives its JSON Schema from the type hints and
its description from the docstring. Its side effect (a line in a ledger file) is keyed by
`exec.idempotency_key`, which stays the same for one durable tool call across a crash, a repair
and a resume: a retried call finds its key and reports a duplicate instead of charging twice.
Here the retry is simulated by executing the same call twice with the same key.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Literal

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field

from framework import AbortController, boot
from plugins.tools import Tool, ToolExecution, ToolExecutionInput, tool


class Receipt(BaseModel):
    """What `charge` returns (the result's value, as JSON)."""

    order: str
    amount_cents: int
    status: Literal["charged", "duplicate"]


def record_once(ledger: Path, key: str, entry: dict[str, object]) -> bool:
    """Append `entry` under `key` unless the key is already there; True if it was new."""
    if ledger.exists():
        for line in ledger.read_text(encoding="utf-8").splitlines():
            if json.loads(line)["key"] == key:
                return False
    with ledger.open("a", encoding="utf-8") as file:
        file.write(json.dumps({"key": key, **entry}) + "\n")
        file.flush()
        os.fsync(file.fileno())  # durable before the tool reports success
    return True


def payment_tool(ledger: Path) -> Tool:
    """The `charge` tool over one ledger file."""

    @tool
    async def charge(
        order: Annotated[str, Field(description="The order to charge for.")],
        amount_cents: Annotated[int, Field(gt=0)],
        exec: ToolExecution,
    ) -> Receipt:
        """Charge the customer for an order, at most once per tool call.

        Args:
            amount_cents: The amount in cents.
        """
        entry = {"order": order, "amount_cents": amount_cents}
        new = await anyio.to_thread.run_sync(record_once, ledger, exec.idempotency_key, entry)
        return Receipt(
            order=order, amount_cents=amount_cents, status="charged" if new else "duplicate"
        )

    return charge


def call(arguments: dict[str, object], key: str) -> ToolExecutionInput:
    """A call of `charge` as the agent loop would make it, with a fixed idempotency key."""
    return ToolExecutionInput(
        call_id="call-1",
        name="charge",
        arguments=arguments,
        signal=AbortController().signal,
        idempotency_key=key,
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        ledger = Path(home) / "ledger.jsonl"
        async with boot([{"id": "tools", "name": "dsh-tools"}]) as ctx:
            charge = payment_tool(ledger)
            ctx.tools.register(charge)
            print("schema:", json.dumps(ctx.tools.get("charge").schema(), sort_keys=True))
            order = {"order": "A-17", "amount_cents": 4200}
            for attempt in ("first attempt", "retry after a crash"):
                result = await ctx.tools.execute(call(order, "session-1:1:1:call-1"))
                print(f"{attempt}: {json.dumps(result.value, sort_keys=True)}")
            other = await ctx.tools.execute(call(order, "session-1:2:1:call-1"))
            print(f"another call: {other.value['status']}")
            bad = await ctx.tools.execute(call({"order": "A-18", "amount_cents": 0}, "k"))
            print(f"invalid call: {bad.content[0]['text']} ({bad.error.info['code']})")
        lines = ledger.read_text(encoding="utf-8").splitlines()
        print(f"ledger: {len(lines)} charges")


if __name__ == "__main__":
    anyio.run(main)
