"""Server processes: started with the fiber, reaped on dispose, restarted after they die, and
start-up failures (a boot error at mount, an ordinary tool result on a later call)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_helpers import TOY, alive, code, eventually, mounted, starts, toy
from pydantic import ValidationError

import plugins.mcp as mcp_plugin
import plugins.tools as tools_plugin
from framework import Context, FiberState
from plugins.mcp import Config, McpStartError, McpTool

pytestmark = pytest.mark.anyio

DIED = (
    'MCP server "toy" stopped while "crash" was running, so its outcome is unknown: the effect '
    "may have happened. Verify the external state before retrying; the server is started again "
    "on the next call."
)


async def test_dispose_stops_and_reaps_the_server(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        (pid,) = starts(tmp_path)
        assert alive(pid)
        await m.fiber.dispose()
        assert not alive(pid)
        assert m.root.tools.schemas() == []


async def test_leaving_the_root_reaps_every_server(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with mounted({"a": toy(tmp_path / "a"), "b": toy(tmp_path / "b")}):
        pids = starts(tmp_path / "a") + starts(tmp_path / "b")
        assert len(pids) == 2
        assert all(alive(pid) for pid in pids)
    assert not any(alive(pid) for pid in pids)


async def test_a_server_dying_mid_call_is_an_unknown_outcome_then_restarts(
    tmp_path: Path,
) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        with anyio.fail_after(20):
            result = await m.call("mcp__toy__crash")
        assert result.to_json() == {
            "isError": True,
            "content": [{"type": "text", "text": f"Error: {DIED}"}],
            "error": {
                "message": DIED,
                "info": {"name": "McpServerDiedError", "code": "MCP_SERVER_DIED"},
            },
        }
        first = starts(tmp_path)[0]
        again = await m.call("mcp__toy__echo", {"text": "back"})
        assert again.content == [{"type": "text", "text": "back"}]
        assert len(starts(tmp_path)) == 2
        assert not alive(first)


async def test_a_server_killed_while_idle_restarts_on_next_use(tmp_path: Path) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        tool = m.root.tools.get("mcp__toy__echo")
        assert isinstance(tool, McpTool)
        assert tool.connection is not None
        (pid,) = starts(tmp_path)
        os.kill(pid, signal.SIGKILL)
        connection = tool.connection
        await eventually(lambda: not connection.up)
        result = await m.call("mcp__toy__echo", {"text": "restarted"})
        assert result.content == [{"type": "text", "text": "restarted"}]
        assert len(starts(tmp_path)) == 2
        assert tool.connection.generation == 2


async def test_a_failed_restart_is_a_result_saying_the_call_was_not_sent(
    tmp_path: Path,
) -> None:
    async with mounted({"toy": toy(tmp_path)}) as m:
        (tmp_path / "refuse").touch()
        await m.call("mcp__toy__crash")
        result = await m.call("mcp__toy__echo", {"text": "x"})
        assert code(result) == "MCP_SERVER_UNAVAILABLE"
        assert result.error is not None
        assert result.error.message == (
            'MCP server "toy" is not available (the server closed the connection during the '
            "handshake; its stderr ends with: toy server: refusing to start); the call was not "
            "sent, so it had no effect. The server is started again on the next call."
        )
        (tmp_path / "refuse").unlink()
        ok = await m.call("mcp__toy__echo", {"text": "x"})
        assert ok.content == [{"type": "text", "text": "x"}]


async def test_a_call_whose_server_hangs_on_restart_times_out_and_reaps_it(
    tmp_path: Path,
) -> None:
    # The deadline leaves a loaded machine time to start the hanging server (it logs its pid
    # first), so the test checks that the start it cancelled is reaped.
    async with mounted({"toy": toy(tmp_path, timeout_ms=4000)}, timeouts=True) as m:
        await m.call("mcp__toy__crash")
        (tmp_path / "hang").touch()
        with anyio.fail_after(30):
            result = await m.call("mcp__toy__echo", {"text": "x"})
        assert code(result) == "TOOL_TIMEOUT"
        first, hung = starts(tmp_path)
        assert not alive(first)
        assert not alive(hung)  # the cancelled start stopped the process it had spawned
        (tmp_path / "hang").unlink()
        # The next call starts the server again. On a loaded machine that start may itself
        # outlast the 4 s deadline: such a call is a timeout like the hung one, never another
        # failure, and a later call gets the answer.
        with anyio.fail_after(60):
            while code(ok := await m.call("mcp__toy__echo", {"text": "x"})) == "TOOL_TIMEOUT":
                pass
        assert ok.content == [{"type": "text", "text": "x"}]


async def _mount_failure(servers: dict[str, Any]) -> BaseException:
    async with Context() as root:
        await root.plugin(tools_plugin)
        fiber = root.plugin(mcp_plugin, {"servers": servers})
        with pytest.raises(Exception) as caught:
            await fiber
        assert fiber.state is FiberState.FAILED
        assert root.tools.schemas() == []
        return caught.value


async def test_a_server_exiting_at_start_fails_the_row_with_its_stderr(tmp_path: Path) -> None:
    error = await _mount_failure({"toy": toy(tmp_path, "--exit-on-start")})
    assert isinstance(error, McpStartError)
    assert str(error) == (
        'MCP server "toy" did not start: the server closed the connection during the '
        "handshake; its stderr ends with: toy server: refusing to start"
    )


async def test_a_handshake_timeout_fails_the_row_and_reaps_the_process(tmp_path: Path) -> None:
    # A shell records the pid before the interpreter starts (on a loaded machine the toy
    # server's own imports may outlast the 500 ms), then becomes the server: same pid.
    server = shlex.join([sys.executable, str(TOY), "--hang-on-start"])
    record = f"echo $$ >> {shlex.quote(str(tmp_path / 'starts'))} && exec {server}"
    entry = {"command": "/bin/sh", "args": ["-c", record], "start_timeout_ms": 500}
    with anyio.fail_after(30):
        error = await _mount_failure({"toy": entry})
    assert str(error) == 'MCP server "toy" did not start: the handshake timed out'
    (pid,) = starts(tmp_path)
    assert not alive(pid)


async def test_every_failing_server_is_named(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / name).mkdir()
    error = await _mount_failure(
        {
            "b": toy(tmp_path / "b", "--exit-on-start"),
            "c": toy(tmp_path / "c"),
            "a": toy(tmp_path / "a", "--exit-on-start"),
        }
    )
    refused = (
        "did not start: the server closed the connection during the handshake; its stderr "
        "ends with: toy server: refusing to start"
    )
    # In config order, the server that started is not named (it was stopped again).
    assert str(error) == f'MCP server "b" {refused}; MCP server "a" {refused}'
    assert not alive(starts(tmp_path / "c")[0])


async def test_an_allow_list_naming_a_missing_tool_fails_the_row(tmp_path: Path) -> None:
    error = await _mount_failure({"toy": toy(tmp_path, tools=["echo", "nope"])})
    assert str(error).startswith(
        'MCP server "toy" offers no tool "nope" (named in tools:); it offers: block, crash'
    )


def test_a_missing_command_is_a_config_error() -> None:
    with pytest.raises(ValidationError) as caught:
        Config.model_validate({"servers": {"x": {"command": "dsh-no-such-mcp-server"}}})
    (problem,) = caught.value.errors()
    assert problem["loc"] == ("servers", "x", "stdio")
    assert problem["msg"] == (
        'MCP server command "dsh-no-such-mcp-server" was not found (looked on PATH and beside '
        "the running Python)"
    )
    with pytest.raises(ValidationError, match="is not an executable file"):
        Config.model_validate({"servers": {"x": {"command": "./nowhere/server"}}})


def test_config_shapes() -> None:
    ok = Config.model_validate(
        {
            "servers": {
                "local": {"command": sys.executable, "args": ["-V"], "timeout_ms": 5},
                "remote": {"url": "http://127.0.0.1:1/mcp", "headers": {"X-A": "b"}},
            }
        }
    )
    assert ok.servers["local"].executable == sys.executable
    for bad in (
        {"servers": {"x": {}}},
        {"servers": {"x": {"url": "ftp://host"}}},
        {"servers": {"bad name": {"command": sys.executable}}},
        {"servers": {"x": {"command": sys.executable, "url": "http://h"}}},
        {"servers": {"x": {"command": sys.executable, "timeout_ms": 0}}},
    ):
        with pytest.raises(ValidationError):
            Config.model_validate(bad)
