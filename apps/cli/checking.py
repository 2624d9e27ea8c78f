"""`dsh check`: every manifest and overlay problem as one `file:line:col: message` line.

Beyond the loader's checks (syntax, shape, overlays, names, variables, configs, services no row
provides), the app checks what `dsh run` would otherwise refuse only once it runs: an agent
without a model, a provider no adapter row serves, a replay script file that does not exist,
and a session root or database folder the backend refuses. See docs/cli.md.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import plugins.agent as agent_plugin
import plugins.llm_openai as openai_plugin
import plugins.llm_replay as replay_plugin
import plugins.session_persistence_jsonl as jsonl_plugin
import plugins.session_persistence_sqlite as sqlite_plugin
from framework.loader import ManifestCheck, inspect_manifest, missing_services
from framework.manifest import Entry, ManifestProblem

from .errors import one_line

#: The first-party adapter plugins: the provider each serves by default and its row name.
ADAPTERS: dict[str, str] = {"replay": "dsh-llm-replay", "openai": "dsh-llm-openai"}


@dataclass(frozen=True)
class Report:
    """What `dsh check` prints: problems (exit 2) and warnings (the manifest still runs)."""

    problems: list[str]
    warnings: list[str]


def problem_line(problem: ManifestProblem) -> str:
    """`path:line:col: message` (`warning: message` for a warning), on one line."""
    text = one_line(problem.message)
    if problem.warning:
        text = f"warning: {text}"
    return f"{problem.loc.full}: {text}" if problem.loc is not None else text


def check(manifest: Path, patches: Sequence[Path]) -> Report:
    """The problem and warning lines of `manifest` plus `patches`."""
    found = inspect_manifest(manifest, list(patches))
    problems = [*found.problems, *missing_services(found)]
    warnings = list(found.warnings)
    if found.manifest is not None and not problems:
        for problem in app_problems(found):
            (warnings if problem.warning else problems).append(problem)
    return Report([problem_line(p) for p in problems], [problem_line(p) for p in warnings])


def refusals(manifest: Path, patches: Sequence[Path]) -> list[ManifestProblem]:
    """The app's problems (not its warnings) that `dsh run` refuses before it boots anything;
    the loader's own problems and missing services are left to the boot, which reports them."""
    found = inspect_manifest(manifest, list(patches))
    if found.manifest is None or found.problems or missing_services(found):
        return []
    return [problem for problem in app_problems(found) if not problem.warning]


def app_problems(found: ManifestCheck) -> Iterator[ManifestProblem]:
    """The app's own checks over a manifest the loader found clean."""
    assert found.manifest is not None
    rows = [
        (entry, found.configs[entry.id])
        for entry in found.manifest.walk(enabled_only=True)
        if entry.id in found.configs
    ]
    served: set[str] = set()
    custom_llm = False
    for entry, config in rows:
        if isinstance(config, replay_plugin.Config | openai_plugin.Config):
            provider = config.provider
            served.update([provider] if isinstance(provider, str) else provider)
        elif _is_custom(found.plugins[entry.id]):
            custom_llm = True
    for entry, config in rows:
        if isinstance(config, agent_plugin.Config):
            yield from _agent(entry, config, served, custom=custom_llm)
        elif isinstance(config, replay_plugin.Config):
            yield from _replay_file(entry, config)
        elif isinstance(config, jsonl_plugin.Config):
            root = Path(config.root) if config.root is not None else jsonl_plugin.default_root()
            yield from _folder(entry, "session root", root, owner_only=False)
        elif isinstance(config, sqlite_plugin.Config):
            path = Path(config.path) if config.path is not None else sqlite_plugin.default_path()
            yield from _folder(entry, "session database folder", path.parent, owner_only=True)


def _is_custom(plugin: object) -> bool:
    """A row whose plugin is not first-party: it may register adapters or fill in a model."""
    module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    return not module.startswith("plugins.")


def _problem(entry: Entry, message: str, *, warning: bool = False) -> ManifestProblem:
    loc = entry.config_loc or entry.loc
    return ManifestProblem(message, loc, entry.id, warning=warning)


def _agent(
    entry: Entry, config: agent_plugin.Config, served: set[str], *, custom: bool
) -> Iterator[ManifestProblem]:
    label = f"entry {entry.id} ({entry.name})"
    unset = [key for key in ("provider", "model") if getattr(config, key) is None]
    if unset:
        keys = " and ".join(f'"{key}"' for key in unset)
        yield _problem(
            entry,
            f"{label} has no model to talk to: set {keys} in its config "
            "(e.g. provider: replay, model: replay)",
            warning=custom,  # a custom row may supply them through the `agent/request` hooks
        )
    provider = config.provider
    if provider is None or provider in served:
        return
    known = ", ".join(f'"{p}"' for p in sorted(served)) or "none"
    hint = f"; add a row with name: {ADAPTERS[provider]}" if provider in ADAPTERS else ""
    yield _problem(
        entry,
        f'{label} asks for provider "{provider}", which no adapter row serves '
        f"(served: {known}){hint}",
        warning=custom,
    )


def _replay_file(entry: Entry, config: replay_plugin.Config) -> Iterator[ManifestProblem]:
    if config.file is None:
        return
    path = Path(config.file).expanduser()
    if not path.is_absolute():
        # The same folder the loader gives the row as `ctx.base_dir` (docs/architecture.md).
        path = Path(entry.loc.path).parent / path
    if not path.is_file():
        yield _problem(
            entry,
            f'replay file "{config.file}" of entry {entry.id} does not exist ({path})',
        )


def _folder(
    entry: Entry, what: str, folder: Path, *, owner_only: bool
) -> Iterator[ManifestProblem]:
    """The backend creates `folder` (and missing parents) or uses it: refuse what it would."""
    reason = _folder_refusal(folder, owner_only=owner_only)
    if reason is not None:
        yield _problem(entry, f'{what} "{folder}" of entry {entry.id} cannot be used: {reason}')


def _folder_refusal(folder: Path, *, owner_only: bool) -> str | None:
    current = folder
    while not os.path.lexists(current):
        if current.parent == current:
            return None
        current = current.parent
    try:
        st = os.stat(current)
    except OSError as error:
        return f'"{current}": {error.strerror}'
    if not stat.S_ISDIR(st.st_mode):
        return f'"{current}" is not a directory'
    if current != folder:
        if not os.access(current, os.W_OK | os.X_OK):
            return f'"{current}" is not writable, so "{folder}" cannot be created'
        return None
    if owner_only and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
        return (
            "it must be owned by this user and owner-only (0700), "
            f"found mode {stat.S_IMODE(st.st_mode):04o}"
        )
    if not os.access(current, os.W_OK | os.X_OK):
        return "it is not writable"
    return None
