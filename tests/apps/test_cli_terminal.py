"""On a terminal `dsh` shows colour and a spinner; `NO_COLOR` turns colour off; a pipe gets
neither (the pipe case is in test_cli_commands)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from dsh_sandbox import Sandbox

COLOUR = re.compile(r"\x1b\[(?:\d+;)*3[0-8](?:;\d+)*m")


def _on_terminal(dsh: Sandbox, *args: str | Path, env: dict[str, str]) -> tuple[int, str]:
    """Run `dsh *args` with stdout and stderr on a pseudo-terminal; its exit code and output."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        dsh.argv(*args),
        cwd=dsh.root,
        env=dsh.env({"TERM": "xterm-256color", "COLUMNS": "120", **env}),
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return process.wait(timeout=30), b"".join(chunks).decode()


def test_colour_and_spinner_on_a_terminal(
    dsh: Sandbox, replay_overlay: Callable[..., Path]
) -> None:
    overlay = replay_overlay("slow.yml", "      - text: Hello there, person.\n", delay_ms=150)
    code, output = _on_terminal(dsh, "run", "--patch", overlay, "hi", env={})
    assert code == 0, output
    assert COLOUR.search(output)
    assert "waiting for the model" in output
    assert "Hello th" in output

    code, plain = _on_terminal(dsh, "run", "--patch", overlay, "hi", env={"NO_COLOR": "1"})
    assert code == 0, plain
    assert not COLOUR.search(plain)
    assert "waiting for the model" in plain
