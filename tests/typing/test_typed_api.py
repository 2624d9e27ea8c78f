"""mypy checks the typed seams: event declarations and the service accessor.

Each snippet marks the lines mypy must reject with `# E: <fragment of the message>` and the
types it must infer with `# R: <revealed type>`; every other line must type-check. One mypy run
(strict, as the project's own config) covers all snippets.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPETS = {
    "listeners": """
        from collections.abc import AsyncIterable, Awaitable, Callable

        from framework import Context
        from plugins.agent.hooks import PRE_STEP, REQUEST_ERROR, STATUS, Enter, PreStep, Reject
        from plugins.llm import GenerateOptions, StreamChunk
        from plugins.llm.hooks import STREAM
        from plugins.session.hooks import EVENT
        from plugins.tools import ToolExecution, ToolExecutionResult
        from plugins.tools.hooks import EXECUTE, POST_EXECUTE


        async def barrier(
            exec: ToolExecution, next: Callable[[], Awaitable[ToolExecutionResult]]
        ) -> ToolExecutionResult:
            return await next()


        async def wrong_payload(
            exec: int, next: Callable[[], Awaitable[ToolExecutionResult]]
        ) -> ToolExecutionResult:
            return await next()


        async def wrong_result(
            exec: ToolExecution, next: Callable[[], Awaitable[ToolExecutionResult]]
        ) -> str:
            return "done"


        def stream(
            options: GenerateOptions, next: Callable[[], AsyncIterable[StreamChunk]]
        ) -> AsyncIterable[StreamChunk]:
            return next()


        async def step(payload: PreStep, next: Callable[[], Awaitable[Enter | Reject]]) -> Enter:
            return Enter()


        def apply(ctx: Context, config: object) -> None:
            ctx.on(EXECUTE, barrier)
            ctx.on(EXECUTE, wrong_payload)  # E: Argument 2 to "on" of "Context"
            ctx.on(EXECUTE, wrong_result)  # E: Argument 2 to "on" of "Context"
            ctx.on(POST_EXECUTE, barrier)  # E: Argument 2 to "on" of "Context"
            ctx.on(STREAM, stream)
            ctx.on(PRE_STEP, step)
            ctx.on(STATUS, lambda agent: print(agent.status))
            ctx.on(STATUS, lambda agent: print(agent.no_such_field))  # E: has no attribute
            ctx.on(EVENT, lambda session, event: print(session.id, event["seq"]))
            ctx.on(REQUEST_ERROR, lambda payload: None)
            ctx.on("tools/execute", wrong_payload)  # a plain name stays unchecked
    """,
    "dispatch": """
        from framework import Context, Emit, Serial, Waterfall

        PING: Emit[int] = Emit("snippet/ping")
        ASK: Serial[str, int] = Serial("snippet/ask")
        WRAP: Waterfall[str, bytes] = Waterfall("snippet/wrap")


        async def run(ctx: Context) -> None:
            ctx.emit(PING, 1)
            ctx.emit(PING, "one")  # E: Cannot infer value of type parameter
            reveal_type(await ctx.serial(ASK, "q"))  # R: int | None
            reveal_type(ctx.waterfall(WRAP, "x", inner=lambda: b""))  # R: bytes
            ctx.waterfall(WRAP, "x", inner=lambda: "text")  # E: Incompatible return value type
            ctx.emit("snippet/untyped", 1, "two")
    """,
    "services": """
        from framework import Context, ServiceKey
        from plugins.session import SessionStore
        from plugins.tools import ToolsService

        CLOCK: ServiceKey[float] = ServiceKey("clock")


        def apply(ctx: Context, config: object) -> None:
            reveal_type(ctx.service(SessionStore))  # R: plugins.session.store.SessionStore
            reveal_type(ctx.get(SessionStore))  # R: plugins.session.store.SessionStore | None
            reveal_type(ctx.service(CLOCK))  # R: float
            ctx.service(ToolsService).register("not a tool")  # E: Argument 1 to "register"
            ctx.service(SessionStore).no_such_method()  # E: has no attribute "no_such_method"
    """,
}


@pytest.fixture(scope="module")
def mypy_output(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[tuple[int, str, str]]]:
    """Per snippet: (line, "error" or "note", message) for everything mypy reported."""
    folder = tmp_path_factory.mktemp("typing")
    paths = []
    for name, body in SNIPPETS.items():
        path = folder / f"snippet_{name}.py"
        path.write_text(textwrap.dedent(body).lstrip())
        paths.append(str(path))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--python-version=3.11",
            "--ignore-missing-imports",
            "--no-error-summary",
            "--show-error-codes",
            f"--cache-dir={folder / 'cache'}",
            *paths,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr
    found: dict[str, list[tuple[int, str, str]]] = {name: [] for name in SNIPPETS}
    for line in result.stdout.splitlines():
        match = re.match(r".*snippet_(\w+)\.py:(\d+): (error|note): (.*)", line)
        assert match, f"unexpected mypy output: {line}"
        found[match[1]].append((int(match[2]), match[3], match[4]))
    return found


def expectations(name: str, marker: str) -> dict[int, str]:
    lines = textwrap.dedent(SNIPPETS[name]).lstrip().splitlines()
    return {
        number: line.split(f"# {marker}: ", 1)[1]
        for number, line in enumerate(lines, start=1)
        if f"# {marker}: " in line
    }


@pytest.mark.parametrize("name", SNIPPETS)
def test_mypy_rejects_exactly_the_marked_lines(
    name: str, mypy_output: dict[str, list[tuple[int, str, str]]]
) -> None:
    expected = expectations(name, "E")
    errors: dict[int, list[str]] = {}
    for number, kind, message in mypy_output[name]:
        if kind == "error":
            errors.setdefault(number, []).append(message)
    assert sorted(errors) == sorted(expected), errors
    for number, fragment in expected.items():
        assert any(fragment in message for message in errors[number]), (number, errors[number])


@pytest.mark.parametrize("name", ["dispatch", "services"])
def test_mypy_infers_the_declared_types(
    name: str, mypy_output: dict[str, list[tuple[int, str, str]]]
) -> None:
    revealed = {
        number: message.removeprefix("Revealed type is ").strip('"')
        for number, kind, message in mypy_output[name]
        if kind == "note" and message.startswith("Revealed type is")
    }
    assert revealed == expectations(name, "R")
