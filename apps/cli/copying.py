"""`dsh copy`: move stored sessions between backends (JSONL, SQLite, PostgreSQL) losslessly.

Each side is a manifest, or an overlay applied on top of the default manifest (`dsh copy --from
config/app.yml --to config/overlays/sqlite.yml`). A session's header and committed events are
written to the target as one batch and read back: the copy's events must serialize to exactly
the same JSON text as the source's, or the copy fails (docs/sessions.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework import Context, ManifestError
from framework.loader import boot
from framework.manifest import load_manifest
from plugins.session.jsonutil import dumps
from plugins.session_persistence import SessionPersistenceError, SessionPersistenceService

from .errors import USAGE, CliError
from .paths import default_manifest


def manifest_and_patches(path: Path) -> tuple[Path, list[Path]]:
    """`(path, [])` for a manifest, `(default manifest, [path])` for an overlay."""
    _, problems = load_manifest(path)
    if not problems:
        return path, []
    base = default_manifest()
    _, as_overlay = load_manifest(base, [path])
    if not as_overlay:
        return base, [path]
    raise ManifestError("\n".join(str(problem) for problem in problems))


@asynccontextmanager
async def booted(path: Path) -> AsyncIterator[Context]:
    """Boot a manifest or an overlay over the default manifest."""
    manifest, patches = manifest_and_patches(path)
    async with boot(manifest, patches) as ctx:
        yield ctx


@dataclass(frozen=True)
class Copied:
    """One session's copy: `events` copied, or the `problem` that stopped it."""

    session_id: str
    events: int = 0
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"type": "copied", "sessionId": self.session_id}
        if self.problem is None:
            line["events"] = self.events
        else:
            line = {"type": "copy-failed", "sessionId": self.session_id, "problem": self.problem}
        return line

    def text(self) -> str:
        if self.problem is not None:
            return f"not copied {self.session_id}: {self.problem}"
        return f"copied {self.session_id} ({self.events} events)"


async def copy_sessions(
    source: SessionPersistenceService,
    target: SessionPersistenceService,
    ids: Sequence[str] | None,
) -> list[Copied]:
    """Copy `ids` (None: every stored session, oldest first) from `source` to `target`."""
    if ids is None:
        ids = [header["id"] for header in await source.list()]
    elif not ids:
        raise CliError("name the sessions to copy (ID...) or pass --all", USAGE)
    return [await _copy_one(source, target, session_id) for session_id in ids]


async def _copy_one(
    source: SessionPersistenceService, target: SessionPersistenceService, session_id: str
) -> Copied:
    try:
        owner = await source.owner(session_id)
        if owner is not None:
            pid = "unknown" if owner.pid is None else owner.pid
            return Copied(
                session_id, problem=f"running (pid {pid} on host {owner.host}); copy it later"
            )
        header = (await source.inspect(session_id)).header
        events = await source.read_from(session_id, 0)
        await target.create({key: value for key, value in header.items() if key != "version"})
        await target.append(session_id, events)
        copied = await target.read_from(session_id, 0)
    except SessionPersistenceError as error:
        return Copied(session_id, problem=str(error))
    if [dumps(e) for e in copied] != [dumps(e) for e in events]:
        return Copied(session_id, problem="the copy reads back different from the source")
    return Copied(session_id, len(events))


async def check_distinct(
    source: SessionPersistenceService, target: SessionPersistenceService
) -> None:
    """Refuse a copy onto the very storage it reads (revisions are distinct per store)."""
    seen = {snapshot.revision for snapshot in await source.list_snapshots()}
    if any(snapshot.revision in seen for snapshot in await target.list_snapshots()):
        raise CliError("--from and --to name the same session storage", USAGE)
