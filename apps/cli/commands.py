"""The `dsh` commands: run, resume, list, show and check durable agent sessions (docs/cli.md).

`apps.cli.main` is the console script that imports this module and calls `dispatch`.
"""

# No `from __future__ import annotations` here: typer reads every command's signature on each
# start, and evaluating string annotations twice per command costs more than the commands'
# module-level aliases (docs/performance.md, "Start-up (P11)").
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, ExitStack
from copy import copy as shallow_copy
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, cast

import anyio
import typer

# typer vendors click and exports neither its Context base nor UsageError
from typer._click.core import Context as ClickContext
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from framework.loader import boot
from plugins.session.jsonutil import dumps
from plugins.session_persistence import SessionLog

from .console import consoles, setup_logging, silence_stdout
from .errors import FAILED, INTERRUPTED, OK, USAGE, CliError, print_json_error, report
from .paths import default_manifest
from .states import STATES, State
from .stored import STORE_ONLY, not_found, persistence_of, stored_events

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from framework import Context
    from framework.manifest import Manifest as ParsedManifest

    from . import approving
    from .views import RunView

# Each command imports the modules only it uses (its runner, views, rich's widgets) in its body:
# a command that reads stored sessions boots only the store and starts in a fraction of the time
# of one that runs the agent (docs/performance.md, "Start-up (P11)").

#: `dsh sessions` shows a progress bar (on a terminal) from this many sessions on.
PROGRESS_MIN = 20


class Commands(TyperGroup):
    """The `dsh` group: under `--json`, a usage error typer reports (an unknown option or
    command, a missing or invalid argument) also prints the JSON `error` line other errors do;
    typer's own message on stderr and exit code 2 stay (docs/cli.md, `--json`)."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        ctx.meta["dsh.args"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: ClickContext) -> object:
        try:
            return super().invoke(ctx)
        except UsageError as error:
            args = ctx.meta.get("dsh.args", [])
            if "--json" in args[: args.index("--") if "--" in args else None]:
                print_json_error("USAGE", error.format_message())
            raise


app = typer.Typer(
    name="dsh",
    cls=Commands,
    help="Run, resume and inspect durable agent sessions.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

Manifest = Annotated[
    Path | None,
    typer.Option(
        "-c",
        "--config",
        metavar="MANIFEST",
        help="Manifest (default: $DSH_CONFIG, else the packaged app.yml).",
    ),
]
Patches = Annotated[
    list[Path] | None,
    typer.Option("--patch", metavar="OVERLAY", help="Overlay applied on top (repeatable)."),
]
Json = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
Debug = Annotated[bool, typer.Option("--debug", help="Debug logging and tracebacks.")]


def _boot(
    config: Path | None,
    patches: list[Path] | None,
    services: "Collection[str] | None" = None,
    resolved: "Callable[[ParsedManifest, Mapping[str, object]], None] | None" = None,
) -> "AbstractAsyncContextManager[Context]":
    """The app of a command: `-c` (else the default manifest) with its `--patch` overlays; with
    `services`, only the rows that provide them (every row is still resolved and checked);
    `resolved` sees the rows the boot resolved (`framework.loader.boot`)."""
    return boot(config or default_manifest(), patches or [], services=services, resolved=resolved)


def _execute(debug: bool, work: Callable[[], Awaitable[int]], *, json: bool = False) -> NoReturn:
    """Run `work` on the event loop; report failures as one line (and, with `json`, one JSON
    object on stdout) and exit with the code."""
    setup_logging(debug=debug)
    try:
        code = anyio.run(work)
    except KeyboardInterrupt:
        print("dsh: interrupted", file=sys.stderr)
        code = INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`dsh show --raw ID | head`): stop quietly.
        silence_stdout()
        code = FAILED
    except Exception as error:
        code = report(error, debug=debug, json=json)
    raise typer.Exit(code)


def _read_prompt(prompt: str | None) -> str:
    if prompt is None:
        if sys.stdin.isatty():
            print("dsh: reading the prompt from stdin (end with Ctrl-D)", file=sys.stderr)
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise CliError("no prompt given (pass PROMPT or pipe it on stdin)", USAGE)
    return prompt


def _drive(
    session_id: str | None,
    prompt: str | None,
    config: Path | None,
    patch: list[Path] | None,
    json: bool,
    debug: bool,
    *,
    must_exist: bool = False,
) -> NoReturn:
    async def work() -> int:
        from . import runner
        from .views import HumanView, JsonView

        options = runner.RunOptions(
            config or default_manifest(),
            patch or [],
            _session_id(session_id),
            _read_prompt(prompt),
            must_exist=must_exist,
        )
        view: RunView = JsonView() if json else HumanView(consoles())
        return await runner.run(options, view)

    _execute(debug, work, json=json)


def _session_id(session_id: str | None) -> str | None:
    if session_id is not None and not session_id:
        raise CliError("a session id must not be empty", USAGE)
    return session_id


@app.command()
def run(
    prompt: Annotated[
        str | None, typer.Argument(metavar="PROMPT", help="The prompt (default: stdin).")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", metavar="ID", help="Resume this session (created if new)."),
    ] = None,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Send a prompt to a new (or the named) session and stream the turn."""
    _drive(session, prompt, config, patch, json, debug)


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The stored session.")],
    prompt: Annotated[str | None, typer.Argument(metavar="PROMPT", help="A new prompt.")] = None,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Continue a session; without PROMPT only load it, repair it and report its state."""
    if prompt is not None:
        _drive(session_id, prompt, config, patch, json, debug, must_exist=True)

    async def work() -> int:
        from . import runner

        options = runner.RunOptions(
            config or default_manifest(), patch or [], _session_id(session_id)
        )
        recovery = await runner.recover(options)
        if json:
            print(dumps(recovery.to_json()))
        else:
            print("\n".join(recovery.lines()))
        return OK

    _execute(debug, work, json=json)


SessionId = Annotated[str, typer.Argument(metavar="ID", help="The stored session.")]
CallId = Annotated[
    str | None,
    typer.Argument(metavar="CALL_ID", help="The call to answer (needed when several wait)."),
]


def _answer(
    session_id: str,
    given: "approving.GivenAnswer",
    config: Path | None,
    patch: list[Path] | None,
    json: bool,
    debug: bool,
) -> NoReturn:
    async def work() -> int:
        from . import runner
        from .views import HumanView, JsonView

        options = runner.RunOptions(
            config or default_manifest(),
            patch or [],
            session_id,
            answer=given,
            must_exist=True,
        )
        view: RunView = JsonView() if json else HumanView(consoles())
        return await runner.run(options, view)

    _execute(debug, work, json=json)


@app.command()
def approve(
    session_id: SessionId,
    call_id: CallId = None,
    always: Annotated[
        bool, typer.Option("--always", help="Allow this tool for the rest of the session.")
    ] = False,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Allow the call a session waits on; the call runs and the session continues."""
    from plugins.tool_approval import Answer

    from . import approving

    answer = Answer.always() if always else Answer.once()
    _answer(session_id, approving.GivenAnswer(call_id, answer), config, patch, json, debug)


@app.command()
def deny(
    session_id: SessionId,
    call_id: CallId = None,
    reason: Annotated[
        str | None, typer.Option("--reason", metavar="TEXT", help="Why, for the model.")
    ] = None,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Refuse the call a session waits on; the model sees the refusal and continues."""
    from plugins.tool_approval import Answer

    from . import approving

    answer = Answer.reject(reason)
    _answer(session_id, approving.GivenAnswer(call_id, answer), config, patch, json, debug)


@app.command()
def sessions(
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    limit: Annotated[
        int | None, typer.Option("--limit", metavar="N", min=0, help="At most N sessions.")
    ] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state",
            metavar="STATE",
            help="Only sessions in this state: running, waiting, interrupted, idle (repeatable).",
        ),
    ] = None,
    debug: Debug = False,
) -> None:
    """List stored sessions, newest first, with their title (or first prompt) and state."""

    async def work() -> int:
        states = tuple(state or STATES)
        for name in states:
            if name not in STATES:
                raise CliError(f"--state: {name!r} is not one of {', '.join(STATES)}", USAGE)
        from . import listing

        shown = consoles()
        with ExitStack() as stack:

            def progress(total: int) -> Callable[[], None]:
                if json or total < PROGRESS_MIN or not shown.interactive:
                    return lambda: None
                from rich.progress import Progress

                bar = stack.enter_context(Progress(console=shown.deco, transient=True))
                task = bar.add_task("reading sessions", total=total)
                return lambda: bar.advance(task)

            async with _boot(config, patch, STORE_ONLY) as ctx:
                rows = await listing.session_rows(
                    persistence_of(ctx),
                    progress,
                    limit=limit,
                    states=cast("tuple[State, ...]", states),
                )
        if json:
            for row in rows:
                print(dumps(row.to_json()))
        elif rows:
            listing.print_table(shown, rows)
        else:
            shown.deco.print("no sessions stored")
        return OK

    _execute(debug, work, json=json)


@app.command()
def show(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The stored session.")],
    config: Manifest = None,
    patch: Patches = None,
    json: Annotated[
        bool,
        typer.Option(
            "--json", help="One event per line in the on-disk envelope (pending repairs included)."
        ),
    ] = False,
    raw: Annotated[bool, typer.Option("--raw", help="The stored artifact verbatim.")] = False,
    messages: Annotated[
        bool,
        typer.Option(
            "--messages", help="The transcript the model receives next (with --json: one object)."
        ),
    ] = False,
    debug: Debug = False,
) -> None:
    """Show a session's timeline and token usage (read-only: nothing is repaired or written)."""

    async def work() -> int:
        from . import transcript
        from .timeline import MountedPolicy, Timeline, storage_notes

        policy = MountedPolicy()
        async with _boot(config, patch, STORE_ONLY, policy) as ctx:
            persistence = persistence_of(ctx)
            if raw:
                sys.stdout.buffer.write(await persistence.read_raw(session_id))
                sys.stdout.buffer.flush()
                return OK
            stored = await stored_events(ctx, session_id)
            if stored is None:
                raise not_found(session_id)
            owner = await persistence.owner(session_id)
            log = await persistence.inspect(session_id)
            if owner is not None:  # its open turn is live, not interrupted: nothing to repair
                log = SessionLog(log.header, stored, log.torn_bytes, log.set_aside)
            location = persistence.locate(log.header)
        if messages:
            if json:
                print(dumps(transcript.transcript_json(session_id, log.events)))
            else:
                consoles().out.print(
                    "\n".join(transcript.transcript_lines(log.events)), markup=False
                )
            return OK
        if json:
            for event in log.events:
                print(dumps(event))
            return OK
        timeline = Timeline(log.events, len(stored), policy.name)
        out = consoles().out
        notes = storage_notes(log, owner, None if location is None else location.path)
        for line in (*timeline.header(log.header), *notes, *timeline.lines()):
            out.print(line)
        for text in transcript.usage_of(log.events).lines():
            out.print(text, markup=False, highlight=False)
        return OK

    _execute(debug, work, json=json)


@app.command()
def check(config: Manifest = None, patch: Patches = None, debug: Debug = False) -> None:
    """Validate a manifest and its overlays without running anything."""

    async def work() -> int:
        from . import checking

        manifest = config or default_manifest()
        report = checking.check(manifest, patch or [])
        for line in (*report.problems, *report.warnings):
            print(line)
        if report.problems:
            print(f"dsh: error: {len(report.problems)} problem(s) in {manifest}", file=sys.stderr)
            return USAGE
        print(f"ok: {manifest}" + "".join(f" + {p}" for p in patch or []))
        return OK

    _execute(debug, work)


@app.command()
def plugins(json: Json = False, debug: Debug = False) -> None:
    """List the plugins manifest names can resolve to (entry points of `dsh.plugins`)."""

    async def work() -> int:
        from rich.table import Table
        from rich.text import Text

        from . import plugin_list

        infos = plugin_list.plugin_infos()
        failed = FAILED if any(info.problem for info in infos) else OK
        if json:
            for info in infos:
                print(dumps(info.to_json()))
            return failed
        table = Table(box=None, pad_edge=False)
        for column in ("entry point", "module", "provides", "needs"):
            table.add_column(column)
        for info in infos:
            cells = (
                info.entry_point,
                info.module,
                info.problem or ", ".join(info.provides) or "-",
                ", ".join(info.needs) or "-",
            )
            table.add_row(*(Text(cell) for cell in cells))  # verbatim, never rich markup
        consoles().out.print(table)
        return failed

    _execute(debug, work, json=json)


@app.command()
def fork(
    session_id: SessionId,
    at: Annotated[
        int | None, typer.Option("--at", metavar="SEQ", help="Fork after this seq (inclusive).")
    ] = None,
    turn: Annotated[
        int | None, typer.Option("--turn", metavar="N", help="Fork at the end of turn N.")
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--as", metavar="NEW_ID", help="The new session's id.")
    ] = None,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Start a new session from a stored one at a turn boundary; list the calls that ran after."""

    async def work() -> int:
        from .forking import fork as make_fork

        async with _boot(config, patch) as ctx:
            made = await make_fork(ctx, session_id, at=at, turn=turn, new_id=new_id)
        if json:
            print(dumps(made.to_json()))
        else:
            for line in made.lines():
                print(line)
        return OK

    _execute(debug, work, json=json)


@app.command()
def doctor(
    session_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="The session to check.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Check every stored session.")] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="Make the safe repairs (after a backup copy).")
    ] = False,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Check session logs (read-only); --apply makes only the repairs a load makes."""

    async def work() -> int:
        from . import doctor as checks

        if (session_id is None) == (not every):
            raise CliError("name one session (ID) or pass --all", USAGE)
        async with _boot(config, patch, STORE_ONLY) as ctx:
            persistence = persistence_of(ctx)
            ids = [session_id] if session_id else [h["id"] for h in await persistence.list()]
            findings = [f for i in ids for f in await checks.examine(persistence, i)]
            repaired = []
            if apply:
                for target in dict.fromkeys(f.session_id for f in findings if f.repairable):
                    repaired.append(await checks.repair(persistence, target))
                findings = [f for i in ids for f in await checks.examine(persistence, i)]
        for repair in repaired:
            if json:
                print(dumps(repair.to_json()))
            else:
                print("\n".join(repair.lines()))
        for finding in findings:
            print(dumps(finding.to_json()) if json else finding.line())
        if json:
            print(dumps(checks.summary_json(len(ids), findings)))
        elif not findings:
            print(f"ok: {len(ids)} session(s) checked, nothing found")
        return FAILED if findings else OK

    _execute(debug, work, json=json)


@app.command()
def rm(
    session_ids: Annotated[list[str], typer.Argument(metavar="ID...", help="The sessions.")],
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Delete stored sessions (one another process runs is refused)."""

    async def work() -> int:
        async with _boot(config, patch, STORE_ONLY) as ctx:
            persistence = persistence_of(ctx)
            for target in session_ids:
                await persistence.delete(target)
                print(
                    dumps({"type": "removed", "sessionId": target}) if json else f"removed {target}"
                )
        return OK

    _execute(debug, work, json=json)


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="DURATION", help="Last active longer ago (e.g. 30d, 12h)."
        ),
    ],
    keep: Annotated[
        int, typer.Option("--keep", metavar="N", min=0, help="Always keep the N newest.")
    ] = 0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    config: Manifest = None,
    patch: Patches = None,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Delete sessions idle for longer than DURATION; never a running or waiting one."""

    async def work() -> int:
        from . import removal

        window = removal.parse_duration(older_than)
        now = time.time_ns() // 1_000_000
        async with _boot(config, patch, STORE_ONLY) as ctx:
            decisions = await removal.prune(
                persistence_of(ctx),
                older_than_ms=window,
                keep=keep,
                dry_run=dry_run,
                now_ms=now,
            )
        for decision in decisions:
            print(dumps(decision.to_json()) if json else decision.text(now))
        return FAILED if any(d.action == "failed" for d in decisions) else OK

    _execute(debug, work, json=json)


@app.command()
def copy(
    source: Annotated[
        Path,
        typer.Option("--from", metavar="MANIFEST_OR_OVERLAY", help="Where the sessions are."),
    ],
    target: Annotated[
        Path,
        typer.Option("--to", metavar="MANIFEST_OR_OVERLAY", help="Where they are copied to."),
    ],
    session_ids: Annotated[
        list[str] | None, typer.Argument(metavar="[ID...]", help="The sessions.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Copy every stored session.")] = False,
    json: Json = False,
    debug: Debug = False,
) -> None:
    """Copy sessions between backends, event for event (an overlay patches the default)."""

    async def work() -> int:
        from . import copying

        if every and session_ids:
            raise CliError("name sessions (ID...) or pass --all, not both", USAGE)
        async with copying.booted(source) as a, copying.booted(target) as b:
            src, dst = persistence_of(a), persistence_of(b)
            await copying.check_distinct(src, dst)
            done = await copying.copy_sessions(src, dst, None if every else session_ids or [])
        for item in done:
            print(dumps(item.to_json()) if json else item.text())
        return FAILED if any(item.problem for item in done) else OK

    _execute(debug, work, json=json)


@app.command()
def export(
    session_id: SessionId,
    html: Annotated[
        Path | None, typer.Option("--html", metavar="FILE", help="Write a self-contained page.")
    ] = None,
    jsonl: Annotated[
        Path | None,
        typer.Option(
            "--jsonl", metavar="FILE", help="Write the stored log as JSONL (- for stdout)."
        ),
    ] = None,
    config: Manifest = None,
    patch: Patches = None,
    debug: Debug = False,
) -> None:
    """Export a session: an HTML timeline readable offline, or its JSONL lines."""

    async def work() -> int:
        from . import export as exporting
        from .timeline import MountedPolicy

        if (html is None) == (jsonl is None):
            raise CliError("pass one of --html FILE or --jsonl FILE", USAGE)
        policy = MountedPolicy()
        async with _boot(config, patch, STORE_ONLY, policy) as ctx:
            persistence = persistence_of(ctx)
            stored = await persistence.read_from(session_id, 0)
            log = await persistence.inspect(session_id)
            if await persistence.owner(session_id) is not None:
                log = SessionLog(log.header, stored, log.torn_bytes, log.set_aside)
        if html is not None:
            page = exporting.html_page(log.header, log.events, len(stored), policy.name)
            html.write_text(page, "utf-8")
            print(f"wrote {html}")
            return OK
        assert jsonl is not None
        text = "".join(line + "\n" for line in exporting.jsonl_lines(log.header, stored))
        if str(jsonl) == "-":
            sys.stdout.write(text)
        else:
            jsonl.write_text(text, "utf-8")
            print(f"wrote {jsonl}", file=sys.stderr)
        return OK

    _execute(debug, work)


@app.command()
def tools(
    config: Manifest = None, patch: Patches = None, json: Json = False, debug: Debug = False
) -> None:
    """List the tools a manifest registers (MCP servers are started to list theirs)."""

    async def work() -> int:
        from . import tools_command

        async with _boot(config, patch) as ctx:
            infos = tools_command.tool_infos(ctx)
        return tools_command.print_tools(infos, json=json)

    _execute(debug, work)


def dispatch() -> None:
    """Run the command line. Typer builds every registered command from its signature on each
    start; a line that names a command builds only that one (docs/performance.md, "Start-up
    (P11)"). Its help, usage errors and behaviour are the same; any other line (no command,
    `--help`, a misspelt name) gets the whole group."""
    word = sys.argv[1] if len(sys.argv) > 1 else None
    named = [info for info in app.registered_commands if _command_name(info) == word]
    if len(named) != 1:
        app(prog_name="dsh")
        return
    lean = shallow_copy(app)
    lean.registered_commands = named
    typer.main.get_group(lean)(prog_name="dsh")


def _command_name(info: "typer.models.CommandInfo") -> str | None:
    """The name a registered command is called by (typer's rule: its own, else its function's
    with `_` as `-`)."""
    if info.name is not None:
        return info.name
    if info.callback is None:
        return None
    return typer.main.get_command_name(info.callback.__name__)
