"""P11's library floor: the least `dsh sessions` does, done with the libraries it uses.

Run as a child process by `p11_cli_start` (`python benchmarks/p11_floor.py sessions`): a typer
app with two commands parses the command line; the command composes a YAML manifest text with
ruamel.yaml, validates its persistence row with a frozen pydantic model with aliases, scans the
`dsh.plugins` entry points, makes a zstd decompressor, runs an empty coroutine with `anyio.run` on
asyncio and prints one line. The libraries are imported the way `dsh` imports its commands (the
cyclic collector paused, then everything frozen). None of the project's own modules is imported,
so the time this takes over `python -c pass` is what no change to the project can remove while
it keeps these libraries (docs/performance.md, "Start-up (P11)").
"""

from __future__ import annotations

import gc

MANIFEST = """\
plugins:
  - name: session-persistence-jsonl
    config: {root: sessions, compression: zstd, inlineWriteMaxMs: 2}
"""


def main() -> None:
    """Import the libraries with the collector paused, build the app, run its command line."""
    gc.disable()
    import importlib.metadata

    import anyio
    import typer
    import zstandard
    from pydantic import BaseModel, ConfigDict, Field
    from ruamel.yaml import YAML

    gc.freeze()
    gc.enable()

    class Persistence(BaseModel):
        """A manifest row's config, validated as the JSONL plugin's is."""

        model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")
        root: str
        compression: str = "zstd"
        inline_write_max_ms: float = Field(default=0.0, alias="inlineWriteMaxMs")

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    async def nothing() -> None:
        """The event loop's start and stop, which every command pays."""

    @app.command()
    def sessions(show_all: bool = typer.Option(False, "--all")) -> None:
        """List nothing, the way `dsh sessions` lists."""
        document = YAML(typ="safe").load(MANIFEST)
        Persistence.model_validate(document["plugins"][0]["config"])
        list(importlib.metadata.entry_points(group="dsh.plugins"))
        zstandard.ZstdDecompressor()
        anyio.run(nothing)
        print("no sessions" if not show_all else "")

    @app.command()
    def show(session_id: str) -> None:
        """A second command, so that typer builds a group as `dsh` does."""
        print(session_id)

    app()


if __name__ == "__main__":
    main()
