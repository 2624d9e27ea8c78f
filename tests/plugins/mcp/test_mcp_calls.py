"""dsh-mcp against the toy SDK server over stdio: naming, results, failures, idempotency key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_helpers import code, eventually, mounted, starts, toy

from framework import AbortController
from plugins.mcp import IDEMPOTENCY_META_KEY, McpTool

pytestmark = pytest.mark.anyio


def failure(message: str, name: str, code: str) -> dict[str, Any]:
    return {
        "isError": True,
        "content": [{"type": "text", "text": f"Error: {message}"}],
        "error": {"message": message, "info": {"name": name, "code": code}},
    }


async def test_tools_are_registered_as_mcp_server_tool_with_read_only_marks(
    tmp_path: Path,
) -> None:
    async with mounted({"toy": toy(tmp_path, read_only=["echo"])}) as m:
        names = sorted(schema["name"] for schema in m.root.tools.schemas())
        assert names == [
            "mcp__toy__block",
            "mcp__toy__crash",
            "mcp__toy__echo",
            "mcp__toy__fail",
            "mcp__toy__headers",
            "mcp__toy__lookup",
            "mcp__toy__lying",
            "mcp__toy__meta",
            "mcp__toy__reject",
            "mcp__toy__shapes",
            "mcp__toy__slow",
        ]
        echo = m.root.tools.get("mcp__toy__echo")
        assert isinstance(echo, McpTool)
        assert (echo.server, echo.remote_name) == ("toy", "echo")
        assert echo.description == "Echo the text back."
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.parameters["required"] == ["text"]
        # Read-only: `echo` by the config, `lookup` by its readOnlyHint; those run in parallel.
        read_only = {name for name in names if m.root.tools.get(name).read_only}
        assert read_only == {"mcp__toy__echo", "mcp__toy__lookup"}
        assert m.root.tools.get("mcp__toy__lookup").concurrency_safe({}) is True
        assert m.root.tools.get("mcp__toy__crash").concurrency_safe({}) is False


async def test_results_and_failures_are_tool_results(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        result = await m.call("mcp__toy__echo", {"text": "hello"})
        assert result.to_json() == {
            "isError": False,
            "content": [{"type": "text", "text": "hello"}],
            "value": {
                "content": [{"type": "text", "text": "hello"}],
                "structuredContent": {"result": "hello"},
            },
        }
        # The durable call's idempotency key travels in `_meta`.
        meta = await m.call("mcp__toy__meta", key="s-1:call-7")
        assert meta.value["structuredContent"][IDEMPOTENCY_META_KEY] == "s-1:call-7"
        # Without a caller-supplied key the tools service makes one; it is forwarded too.
        other = await m.call("mcp__toy__meta", call_id="call-8")
        assert other.value["structuredContent"][IDEMPOTENCY_META_KEY].startswith("dsh-")
        # `isError`: the message is the tool's own text, as the server wrote it.
        failed = await m.call("mcp__toy__fail", {"reason": "disk on fire"})
        assert failed.to_json() == failure(
            "Error executing tool fail: disk on fire", "McpToolError", "MCP_TOOL_ERROR"
        )
        rejected = await m.call("mcp__toy__reject")
        message = (
            'MCP server "toy" rejected the call to "reject": the toy server rejects this call '
            "(MCP error -32602)"
        )
        assert rejected.to_json() == failure(message, "McpCallError", "MCP_ERROR")
        # An answer the SDK refuses after the tool ran: the text says the call ran.
        lying = await m.call("mcp__toy__lying")
        assert code(lying) == "MCP_INVALID_RESULT"
        assert lying.error is not None
        assert lying.error.message.startswith(
            'MCP server "toy" answered the call to "lying" with a result that cannot be used '
            "(Invalid structured content returned by tool lying: "
        )
        assert lying.error.message.endswith("; the call ran, so its effect may have happened.")
        assert (tmp_path / "lying.started").exists()


async def test_arguments_are_checked_against_the_translated_schema(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        bad = await m.call("mcp__toy__echo", {"text": 3})
        assert code(bad) == "INVALID_ARGS"
        assert starts(tmp_path) == starts(tmp_path)[:1]  # nothing was sent or restarted
        # `shapes` uses $ref, minLength, pattern, anyOf: relaxed keywords are the server's job.
        shapes = m.root.tools.get("mcp__toy__shapes")
        assert shapes.parameters["properties"]["points"]["items"]["properties"]["x"] == {
            "title": "X",
            "type": "integer",
        }
        assert shapes.parameters["properties"]["note"]["oneOf"] == [
            {"type": "string"},
            {"type": "null"},
        ]
        ok = await m.call("mcp__toy__shapes", {"name": "ab", "points": [{"x": 1, "y": 2}]})
        assert ok.content == [{"type": "text", "text": "ab: 1 points, fast, None"}]
        # The server still enforces what the subset could not say (minLength 2 here).
        short = await m.call("mcp__toy__shapes", {"name": "a", "points": [{"x": 1, "y": 2}]})
        assert short.is_error
        assert code(short) in ("MCP_TOOL_ERROR", "MCP_ERROR")


async def test_the_allow_list_limits_what_is_registered(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path, tools=["echo", "lookup"])}) as m:
        names = sorted(schema["name"] for schema in m.root.tools.schemas())
        assert names == ["mcp__toy__echo", "mcp__toy__lookup"]
        result = await m.call("mcp__toy__fail")
        assert code(result) == "UNKNOWN_TOOL"


async def test_a_timeout_is_the_policy_result_and_the_server_goes_on(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path, timeout_ms=300)}, timeouts=True) as m:
        with anyio.fail_after(20):
            result = await m.call("mcp__toy__slow", {"seconds": 30})
        assert result.to_json() == failure(
            "tool call timed out after 300ms", "ToolTimeoutError", "TOOL_TIMEOUT"
        )
        await eventually((tmp_path / "slow.cancelled").exists)
        again = await m.call("mcp__toy__echo", {"text": "still here"})
        assert again.content == [{"type": "text", "text": "still here"}]
        assert len(starts(tmp_path)) == 1


async def test_an_abort_cancels_the_request(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        controller = AbortController()
        async with anyio.create_task_group() as group:

            async def abort_when_started() -> None:
                await eventually((tmp_path / "slow.started").exists)
                controller.abort()

            group.start_soon(abort_when_started)
            with anyio.fail_after(20):
                result = await m.call("mcp__toy__slow", {"seconds": 30}, signal=controller.signal)
        assert code(result) == "ABORTED"
        # The client told the server (notifications/cancelled): the tool was interrupted.
        await eventually((tmp_path / "slow.cancelled").exists)
        again = await m.call("mcp__toy__echo", {"text": "after abort"})
        assert again.content == [{"type": "text", "text": "after abort"}]
