"""dsh-mcp over streamable HTTP against the toy server listening on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_helpers import code, http_toy, mounted

from plugins.mcp import IDEMPOTENCY_META_KEY, McpTool

pytestmark = pytest.mark.anyio


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    with http_toy(tmp_path) as (address, _process):
        yield address


async def test_calls_over_streamable_http(url: str) -> None:
    server = {"url": url, "headers": {"X-Dsh-Test": "header value"}}
    async with mounted({"web": server}) as m:
        echo = await m.call("mcp__web__echo", {"text": "over http"})
        assert echo.content == [{"type": "text", "text": "over http"}]
        meta = await m.call("mcp__web__meta", key="s-2:call-1")
        assert meta.value["structuredContent"][IDEMPOTENCY_META_KEY] == "s-2:call-1"
        headers = await m.call("mcp__web__headers")
        assert headers.value["structuredContent"]["x-dsh-test"] == "header value"
        failed = await m.call("mcp__web__fail", {"reason": "nope"})
        assert code(failed) == "MCP_TOOL_ERROR"


async def test_a_server_that_goes_away_is_a_result_and_reconnects_when_back(tmp_path: Path) -> None:
    with http_toy(tmp_path) as (url, process):
        async with mounted({"web": {"url": url}}) as m:
            tool = m.root.tools.get("mcp__web__echo")
            assert isinstance(tool, McpTool)
            assert tool.connection is not None
            first = tool.connection.generation
            process.kill()
            process.wait()
            with anyio.fail_after(30):
                gone = await m.call("mcp__web__echo", {"text": "anyone?"})
            # Over HTTP the client cannot tell whether the request reached the server: "may".
            assert code(gone) == "MCP_SERVER_DIED"
            # Nothing listens any more: the next call cannot reconnect, and says so.
            with anyio.fail_after(30):
                down = await m.call("mcp__web__echo", {"text": "anyone?"})
            assert code(down) == "MCP_SERVER_UNAVAILABLE"
            assert "the call was not sent" in down.error.message
            assert tool.connection.generation == first
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            with http_toy(tmp_path, port):
                back = await m.call("mcp__web__echo", {"text": "back"})
            assert back.content == [{"type": "text", "text": "back"}]
            assert tool.connection.generation == first + 1
