"""A stdio MCP proxy that withholds the answer to one tool: the call takes effect, the client
never hears back. For crash tests against real servers (mcp-server-git).

    python slow_proxy.py --hold TOOL --state DIR -- COMMAND [ARGS...]

Runs COMMAND as the real server and relays newline-delimited JSON-RPC both ways, except the
response to a `tools/call` of TOOL: that one is written to `DIR/<TOOL>.answered` (so a test
knows the effect happened) and never forwarded. Ends when the client closes stdin (the server's
stdin is closed in turn) or the server ends. Pids go to `DIR/proxy.pid` and `DIR/server.pid`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None
    assert server.stdout is not None
    (args.state / "proxy.pid").write_text(str(os.getpid()))
    (args.state / "server.pid").write_text(str(server.pid))
    held: set[Any] = set()
    threading.Thread(
        target=_client_to_server, args=(server.stdin, args.hold, held), daemon=True
    ).start()
    for line in server.stdout:
        message = _parse(line)
        if message is not None and "method" not in message and message.get("id") in held:
            (args.state / f"{args.hold}.answered").write_bytes(line)
            continue
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    server.wait()


def _client_to_server(sink: IO[bytes], hold: str, held: set[Any]) -> None:
    for line in sys.stdin.buffer:
        message = _parse(line)
        params = (message or {}).get("params") or {}
        if (message or {}).get("method") == "tools/call" and params.get("name") == hold:
            held.add((message or {}).get("id"))
        sink.write(line)
        sink.flush()
    sink.close()


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


if __name__ == "__main__":
    main()
