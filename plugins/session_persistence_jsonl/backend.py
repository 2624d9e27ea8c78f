"""The JSONL storage engine: one append-only log file per session (docs/persistence.md).

All file I/O is synchronous and runs off the loop, on the backend's I/O thread (or a worker
thread while that one is busy: `offload.IoThread`), except a live session's append when the
inline gate allows it (`inline.InlineGate`, off by default); the coordinator never overlaps two
calls for one id, so per-id state needs no further locking.

Format versions: a header whose `version` is not 0 is returned as is, with no events decoded
and no shape check, so the coordinator refuses it with the spec's `SessionFormatUnsupportedError`
texts (and the raw log path from `locate`). Likewise a header whose id differs from the requested
one is returned for the coordinator's identity check; a header whose cwd (or, in `list`, id) does
not reproduce its directory is `SessionPersistenceCorruptionError`.
"""

from __future__ import annotations

import builtins
import errno
import os
import secrets
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from plugins.session.jsonutil import dumps
from plugins.session_persistence import fsguard
from plugins.session_persistence.ahead import Handoff
from plugins.session_persistence.backend import (
    JsonObject,
    LiveEncoder,
    Location,
    Owner,
    SetAside,
    Snapshot,
    StoredLog,
)
from plugins.session_persistence.base import BackendBase
from plugins.session_persistence.errors import (
    SessionExistsError,
    SessionNotFoundError,
    SessionPersistenceError,
    StaleWriterError,
)
from plugins.session_persistence.header import meta_of, stored_header
from plugins.session_persistence.inline import InlineGate
from plugins.session_persistence.offload import IoThread

from . import frames
from .encoder import Ahead, batch_text
from .fileops import FileOps
from .identity import read_or_create_store_id
from .layout import (
    LOCK_NAME,
    duplicate_id,
    encoding_mismatch,
    flat_layout,
    log_name,
    misplaced_log,
    project_dir,
    requested_id_mismatch,
    segment,
    unescape,
)
from .lock import LockTable, WriterLock, lock_holder, lock_table
from .reader import (
    LogScan,
    TornMarker,
    header_complete,
    read_header,
    scan_raw,
    scan_zstd,
)

__all__ = ["RESERVE_BYTES", "Compression", "JsonlBackend", "header_line"]

#: How far ahead of a live log's end its writer reserves, once per this many bytes appended.
#: Smaller steps left ext4 journaling more per `fsync` after the first (docs/performance.md).
RESERVE_BYTES: Final = 2 << 20

Compression = Literal["zstd", "none"]
T = TypeVar("T")

_READ_ATTEMPTS: Final = 20
#: `load_many` reads no further once the logs it read hold this many bytes (on disk).
LOAD_MANY_BYTES: Final = 1 << 20
#: The root's project directories, each with its storage-rule refusal (None when it is fine).
_Projects = builtins.list[tuple[os.DirEntry[str], fsguard.UnsafeStorageError | None]]
_APPEND_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class _Owner:
    """A live session bound to this instance: its writer lock (taken at the latest when the
    log is created) and a kept append descriptor with its `fstat` when opened (the file it
    names never changes; only its size does). From its second append the descriptor reserves
    the log's next blocks (`reserve`) whenever a write would reach `reserve_at`; `reserved`
    says some were, so letting the log go frees what is left past its end."""

    lock: WriterLock | None = None
    fd: int = -1
    held: os.stat_result | None = None
    reserve_at: int = 0
    reserved: bool = False


def header_line(meta: JsonObject) -> bytes:
    """Line 1 of a log: `{"type":"session","version":0,...}` in the fixed key order."""
    return (dumps(stored_header(meta)) + "\n").encode()


#: What a repair cut from `<log>` is kept in: `<log>.torn-<epoch ms>`.
TORN_SUFFIX: Final = ".torn-"


def _revision(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == (
        b.st_dev,
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
    )


class JsonlBackend(BackendBase):
    """JSONL logs under `root`: `<root>/<project>/<segment(id)>/session.jsonl[.zstd]`.

    `compression` is `"zstd"` (one checksummed frame per durable batch) or `"none"`;
    `pack_chunks` stores runs of streaming deltas as packed rows. `inline_write_max_ms` above 0
    lets appends run on the loop thread under `inline_gate` (docs/performance.md). `fileops` is
    the seam for the write path's OS calls (fault injection in tests).
    """

    name: str = "session-persistence-jsonl"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        compression: Compression = "zstd",
        pack_chunks: bool = True,
        inline_write_max_ms: float = 0.0,
        fileops: FileOps | None = None,
    ) -> None:
        if compression not in ("zstd", "none"):
            raise ValueError(f'compression must be "zstd" or "none", got {compression!r}')
        self.root = Path(root)
        if not self.root.is_absolute():
            raise ValueError(f"the JSONL session root must be an absolute path, got {str(root)!r}")
        #: `str(self.root)`, which every append's path needs (`PurePath.__str__` is Python).
        self._root = str(self.root)
        self.compression: Final[Compression] = compression
        self.pack_chunks: Final = pack_chunks
        self._io = fileops or FileOps()
        self.inline_gate = InlineGate(inline_write_max_ms)
        self._thread = IoThread(f"dsh-jsonl {root}", overflow=True, gate=self.inline_gate)
        self._log_name = log_name(compression)
        self._other_name = log_name("none" if compression == "zstd" else "zstd")
        self._owners: dict[str, _Owner] = {}
        self._sizes: dict[str, int] = {}
        #: session id -> (st_dev, st_ino) of the log this process last read or wrote.
        self._files: dict[str, tuple[int, int]] = {}
        #: session id -> the prepared lines of the live write about to call `append_batch`.
        self._handoff: dict[str, Ahead] = {}
        #: The store's id once read: it never changes, and every tool step asks for it.
        self._identity: str | None = None

    # ---- Protocol ------------------------------------------------------------------------

    def locate(self, meta: JsonObject) -> Location:
        """The log path of `meta`'s session (no I/O)."""
        return Location("file", self._path(meta))

    async def read_raw(self, session_id: str) -> bytes:
        """The log file's bytes verbatim (compressed in zstd mode)."""
        return await self._run(self._read_raw, session_id)

    async def load_stored(self, session_id: str) -> StoredLog | None:
        """Read, decode and check the stored log; None when nothing is stored."""
        return await self._run(self._load_stored, session_id)

    async def load_many(
        self, session_ids: Sequence[str]
    ) -> builtins.list[StoredLog | Exception | None]:
        """`load_stored` of the first of `session_ids` and of the following ones until the logs
        read hold `LOAD_MANY_BYTES`, in one trip to the I/O thread and one scan of the root."""
        return await self._run(self._load_many, list(session_ids))

    async def read_stored_revision(self, session_id: str) -> str | None:
        """`<dev>:<ino>:<size>:<mtime_ns>:<ctime_ns>` of the log, None when nothing is stored."""
        return await self._run(self._read_stored_revision, session_id)

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        """Make `events` durable as one unit (creating the log with them when not materialized),
        with the lines a live session's encoder prepared for them (`ahead.Handoff`)."""
        ahead = self._handoff.pop(meta["id"], None)
        await self._thread.run(
            self._append_batch, meta, list(events), ahead, is_materialized, inline=is_materialized
        )

    def live_encoder(self) -> LiveEncoder:
        """A live session's writes, its lines made as its events are admitted; its synchronous
        append (`ahead.Handoff.append_inline`) is the I/O thread's `try_inline` of a
        materialized `_append_batch` (False: the gate said no, nothing was done)."""
        inline = partial(self._thread.try_inline, self._append_batch)
        return Handoff(self, self._handoff, Ahead(pack=self.pack_chunks), inline)

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        """Keep a torn tail's bytes in `<log>.torn-<ms>`, cut the log back to `marker`, then
        append its recovered events and `closers`."""
        if marker is not None and not isinstance(marker, TornMarker):
            raise TypeError(f"not a JSONL torn-tail marker: {marker!r}")
        return await self._run(self._commit_repair, meta, marker, list(closers))

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        """Headers with revisions, by `(createdAt, id)`."""
        return await self._run(self._list_snapshots)

    async def delete_stored(self, session_id: str) -> bool:
        """Remove the session's directory: the log first (from then on nothing is stored), then
        the bytes repairs set aside and the lock; files this backend did not write stay."""
        return await self._run(self._delete_stored, session_id)

    async def acquire_writer(self, session_id: str) -> None:
        """Bind `session_id` to this instance; lock it now if its directory exists, else when
        its log is created (before the link)."""
        await self._run(self._acquire_writer, session_id)

    async def owner(self, session_id: str) -> Owner | None:
        """The process holding `session_id`'s `session.lock`, unless it is this instance."""
        if session_id in self._owners:
            return None
        return await self._run(self._owner, session_id)

    async def owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        """`owner` of each id with one read of the lock table and of the root (a listing's
        probes); an id whose probe fails is left out (its own `owner` call raises why)."""
        probed = [i for i in session_ids if i not in self._owners]
        found = await self._run(self._probe_owners, probed)
        return {i: found.get(i) for i in session_ids if i not in probed or i in found}

    async def release_writer(self, session_id: str) -> None:
        """Unbind `session_id` and free its lock (no-op when not held)."""
        owner = self._owners.pop(session_id, None)
        if owner is not None:
            self._drop(session_id, owner)

    async def store_identity(self) -> str:
        """The random id in `<root>/store-id` (0600), created on first use; read once per
        instance (an id that changed under a running process would change its calls' keys)."""
        if self._identity is None:
            self._identity = await self._run(read_or_create_store_id, self._root, self._io)
        return self._identity

    async def aclose(self) -> None:
        """Release every lock and descriptor, and let the I/O thread go."""
        owners = list(self._owners.items())
        self._owners.clear()
        for session_id, owner in owners:
            self._drop(session_id, owner)
        self._thread.close()

    # ---- layout --------------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._thread.run(fn, *args)

    def _path(self, meta: JsonObject) -> str:
        return _log_path(self._root, meta.get("cwd"), meta["id"], self._log_name)

    def _lookup(self, session_id: str, projects: _Projects | None = None) -> str | None:
        """The log path of a stored id, refusing layouts this backend does not read
        (`projects`: the root's, when the caller read them for many ids)."""
        seg = segment(session_id)
        found: builtins.list[str] = []
        projects = self._projects() if projects is None else projects
        if projects is None:
            return None
        for project, refusal in sorted(projects, key=lambda pair: pair[0].name):
            base = project.path
            if refusal is not None:
                # Only a stat through it: refuse it for the ids it holds, not for every id.
                names = (seg, f"{seg}.jsonl", f"{seg}.jsonl.zstd")
                if any(os.path.lexists(os.path.join(base, name)) for name in names):
                    raise refusal
                continue
            for flat in (f"{seg}.jsonl", f"{seg}.jsonl.zstd"):
                if os.path.lexists(os.path.join(base, flat)):
                    raise flat_layout(os.path.join(base, flat))
            directory = os.path.join(base, seg)
            try:
                fsguard.check_dir(directory)
            except FileNotFoundError:
                continue
            other = os.path.join(directory, self._other_name)
            if os.path.lexists(other):
                raise encoding_mismatch(other, self.compression)
            path = os.path.join(directory, self._log_name)
            try:
                fsguard.check_file(path)
            except FileNotFoundError:
                continue
            found.append(path)
        if len(found) > 1:
            raise duplicate_id(session_id)
        return found[0] if found else None

    def _projects(self) -> _Projects | None:
        """The project directories of the root, each with its storage-rule refusal (None when
        it is fine); None when the root does not exist. Other files in the root are ignored;
        an unsafe root is refused."""
        root = self._root
        if not fsguard.check_path(root, root):
            return None
        projects: builtins.list[tuple[os.DirEntry[str], fsguard.UnsafeStorageError | None]] = []
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.is_symlink() or entry.is_dir(follow_symlinks=False):
                    try:
                        fsguard.check_dir(entry.path, entry.stat(follow_symlinks=False))
                    except fsguard.UnsafeStorageError as refusal:
                        projects.append((entry, refusal))
                    else:
                        projects.append((entry, None))
        return projects

    def _check_location(self, path: str, header: JsonObject) -> None:
        """A v0 log's header (shape checked by the reader) must reproduce its path."""
        session_id = header["id"]
        if session_id == "":
            raise misplaced_log(path, session_id, None)
        expected = _log_path(self._root, header.get("cwd"), session_id, self._log_name)
        if path != expected:
            raise misplaced_log(path, session_id, expected)

    # ---- reads ---------------------------------------------------------------------------

    def _read_stable(self, path: str, *, head: bool = False) -> tuple[bytes, os.stat_result] | None:
        """stat/read/stat until the file holds still; None when it does not exist.

        `head`: read only as far as the header's first line (or frame), not the whole file.
        """
        zstd = self.compression == "zstd"
        for _ in range(_READ_ATTEMPTS):
            try:
                before = os.lstat(path)
                fsguard.check_file(path, before)
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    data = _read_head(fd, zstd=zstd) if head else _read_all(fd, before.st_size)
                finally:
                    os.close(fd)
                after = os.lstat(path)
            except FileNotFoundError:
                return None
            if _same(before, after) and (head or len(data) == after.st_size):
                return data, after
        raise SessionPersistenceError(f'session log "{path}" kept changing while being read')

    def _scan(self, data: bytes) -> LogScan:
        return scan_zstd(data) if self.compression == "zstd" else scan_raw(data)

    def _read_raw(self, session_id: str) -> bytes:
        path = self._lookup(session_id)
        read = None if path is None else self._read_stable(path)
        if read is None:
            raise SessionNotFoundError(session_id)
        return read[0]

    def _load_stored(self, session_id: str, projects: _Projects | None = None) -> StoredLog | None:
        path = self._lookup(session_id, projects)
        read = None if path is None else self._read_stable(path)
        if path is None or read is None:
            return None
        data, st = read
        scan = self._scan(data)
        meta = meta_of(scan.header)
        if scan.header["version"] == 0:
            if meta["id"] != session_id:
                raise requested_id_mismatch(path, session_id, meta["id"])
            self._check_location(path, scan.header)
        self._sizes[session_id] = len(data)
        self._files[session_id] = (st.st_dev, st.st_ino)
        marker = scan.marker
        torn_bytes = 0 if marker is None else len(data) - marker.truncate_to
        return StoredLog(
            meta, scan.events, _revision(st), marker, torn_bytes, _set_aside_beside(path)
        )

    def _load_many(
        self, session_ids: builtins.list[str]
    ) -> builtins.list[StoredLog | Exception | None]:
        try:
            projects = self._projects()
        except Exception as error:  # refused for every id: the next call tells the next one
            return [error]
        found: builtins.list[StoredLog | Exception | None] = []
        read = 0
        for session_id in session_ids:
            try:
                stored = self._load_stored(session_id, projects)
            except Exception as error:
                found.append(error)
                continue
            found.append(stored)
            if stored is not None:
                read += self._sizes[session_id]
                if read >= LOAD_MANY_BYTES:
                    break
        return found

    def _owner(
        self, session_id: str, table: LockTable | None = None, projects: _Projects | None = None
    ) -> Owner | None:
        path = self._lookup(session_id, projects)
        if path is None:
            return None
        return lock_holder(os.path.join(os.path.dirname(path), LOCK_NAME), table)

    def _probe_owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        table, projects = lock_table(), self._projects()
        found: dict[str, Owner | None] = {}
        for session_id in session_ids:
            with suppress(SessionPersistenceError):
                found[session_id] = self._owner(session_id, table, projects)
        return found

    def _read_stored_revision(self, session_id: str) -> str | None:
        path = self._lookup(session_id)
        if path is None:
            return None
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        fsguard.check_file(path, st)
        return _revision(st)

    def _read_header(self, path: str) -> tuple[JsonObject, os.stat_result] | None:
        """A log's header record and stat, reading only its first line (or frame)."""
        read = self._read_stable(path, head=True)
        if read is None:
            return None
        head, st = read
        return read_header(head, zstd=self.compression == "zstd"), st

    def _list_snapshots(self) -> builtins.list[Snapshot]:
        """Every stored session; one whose layout or files this backend refuses is listed as a
        problem row (`problem_snapshot`) instead of failing the whole listing."""
        snapshots: builtins.list[Snapshot] = []
        seen: dict[str, str] = {}
        for project, refusal in self._projects() or ():
            if refusal is not None:
                snapshots.append(problem_snapshot(project.name, project.path, refusal))
                continue
            for entry in os.scandir(project.path):
                try:
                    snapshot = self._entry_snapshot(entry, seen)
                except SessionPersistenceError as error:
                    name = entry.name.removesuffix(".zstd").removesuffix(".jsonl")
                    snapshots.append(problem_snapshot(unescape(name), entry.path, error))
                    continue
                if snapshot is not None:
                    snapshots.append(snapshot)
        snapshots.sort(key=lambda s: (_sort_time(s.header), str(s.header.get("id"))))
        return snapshots

    def _entry_snapshot(self, entry: os.DirEntry[str], seen: dict[str, str]) -> Snapshot | None:
        """The snapshot of one entry of a project directory; None for what holds no log."""
        if entry.name.endswith((".jsonl", ".jsonl.zstd")) and not entry.is_dir(
            follow_symlinks=False
        ):
            raise flat_layout(entry.path)
        if not entry.is_symlink() and not entry.is_dir(follow_symlinks=False):
            return None
        fsguard.check_dir(entry.path, entry.stat(follow_symlinks=False))
        other = os.path.join(entry.path, self._other_name)
        if os.path.lexists(other):
            raise encoding_mismatch(other, self.compression)
        path = os.path.join(entry.path, self._log_name)
        read = self._read_header(path)
        if read is None:
            return None
        header, st = read
        if header["version"] == 0:
            self._check_location(path, header)
        session_id = str(header.get("id"))
        if session_id in seen:
            raise duplicate_id(session_id)
        seen[session_id] = path
        return Snapshot(meta_of(header), _revision(st))

    # ---- writes --------------------------------------------------------------------------

    def _encode(self, events: Sequence[JsonObject], ahead: Ahead | None = None) -> bytes:
        """One durable batch: its lines (one frame of them in zstd mode); empty for no events.
        `ahead`: what a live session prepared for them."""
        if not events:
            return b""
        plain = batch_text(events, pack=self.pack_chunks, ahead=ahead).encode()
        return frames.compress_frame(plain) if self.compression == "zstd" else plain

    def _acquire_writer(self, session_id: str) -> None:
        if session_id in self._owners:
            return
        owner = _Owner()
        path = self._lookup(session_id)
        if path is not None:
            owner.lock = WriterLock.acquire(
                session_id, os.path.join(os.path.dirname(path), LOCK_NAME)
            )
        self._owners[session_id] = owner

    def _lock_for_write(self, session_id: str, path: str) -> WriterLock | None:
        """The lock a write of log `path` runs under: the owner's (taken now if still pending)
        or a transient one, returned so the caller frees it after the write."""
        owner = self._owners.get(session_id)
        if owner is not None and owner.lock is not None:
            return None
        fsguard.check_path(self._root, path)
        lock = WriterLock.acquire(session_id, os.path.join(os.path.dirname(path), LOCK_NAME))
        if owner is None:
            return lock
        owner.lock = lock
        return None

    def _append_batch(
        self,
        meta: JsonObject,
        events: builtins.list[JsonObject],
        ahead: Ahead | None,
        is_materialized: bool = True,
    ) -> None:
        session_id = meta["id"]
        path = self._path(meta)
        if not is_materialized:
            self._materialize(session_id, meta, path, self._encode(events, ahead))
            return
        payload = self._encode(events, ahead)
        if not payload:
            return
        transient = self._lock_for_write(session_id, path)
        try:
            self._append(session_id, path, payload, None)
        finally:
            if transient is not None:
                transient.release()

    def _commit_repair(
        self, meta: JsonObject, marker: TornMarker | None, closers: builtins.list[JsonObject]
    ) -> SetAside | None:
        if marker is None and not closers:
            return None
        session_id = meta["id"]
        path = self._path(meta)
        payload = self._encode([*marker.recovered, *closers] if marker else closers)
        transient = self._lock_for_write(session_id, path)
        try:
            return self._append(session_id, path, payload, marker)
        finally:
            if transient is not None:
                transient.release()

    def _append(
        self, session_id: str, path: str, payload: bytes, marker: TornMarker | None
    ) -> SetAside | None:
        """Under the writer lock: check the size, set a torn tail aside and cut it, append,
        fsync; roll back on failure. Where the cut bytes were kept (None when nothing was cut)."""
        io = self._io
        owner = self._owners.get(session_id)
        fd, held = (owner.fd, owner.held) if owner is not None else (-1, None)
        # The owner whose descriptor is kept from an earlier append reserves blocks ahead.
        reserving = owner if fd >= 0 else None
        if fd < 0:
            # A kept descriptor was checked when it was opened; from then on the path must
            # only keep naming its file (below).
            fsguard.check_path(self._root, path)
            try:
                fd = io.open(path, _APPEND_FLAGS)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    fsguard.check_file(path)  # raises: a symbolic link
                raise
        try:
            if held is None:
                held = os.fstat(fd)
                if owner is not None:
                    owner.fd, owner.held = fd, held
            if self._files.setdefault(session_id, (held.st_dev, held.st_ino)) != (
                held.st_dev,
                held.st_ino,
            ):
                raise fsguard.ReplacedFileError(path)
            fsguard.check_same_file(path, held)
            if owner is not None and owner.lock is not None:
                owner.lock.check()
            size = io.size(fd)
            expected = marker.seen_size if marker is not None else self._sizes.get(session_id)
            if size != expected:
                raise StaleWriterError(session_id)
            kept = None
            if marker is not None and marker.truncate_to != size:
                kept = self._set_aside(session_id, path, fd, marker.truncate_to, size)
                io.ftruncate(fd, marker.truncate_to)
                io.fsync(fd)
                size = marker.truncate_to
                self._sizes[session_id] = size
            if payload:
                if reserving is not None and size + len(payload) > reserving.reserve_at:
                    reserving.reserved |= io.reserve(fd, size, RESERVE_BYTES)
                    reserving.reserve_at = size + RESERVE_BYTES
                try:
                    io.write_all(fd, payload)
                    io.fsync(fd)
                except Exception as error:
                    self._roll_back(fd, size, path, error)
                    raise
            self._sizes[session_id] = size + len(payload)
        except BaseException:
            if owner is not None:
                owner.fd, owner.held, owner.reserve_at, owner.reserved = -1, None, 0, False
            io.close(fd)
            raise
        if owner is None:
            io.close(fd)
        return kept

    def _set_aside(self, session_id: str, path: str, fd: int, start: int, end: int) -> SetAside:
        """Copy bytes `start:end` of the log held open as `fd` to a new `<log>.torn-<ms>`
        (0600), durably, before a repair cuts them: a repair never destroys evidence."""
        io = self._io
        source = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            held, named = os.fstat(fd), os.fstat(source)
            if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
                raise StaleWriterError(session_id)
            tail = os.pread(source, end - start, start)
        finally:
            os.close(source)
        stamp = time.time_ns() // 1_000_000
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        while True:
            target = f"{path}{TORN_SUFFIX}{stamp}"
            try:
                out = io.open(target, flags)
                break
            except FileExistsError:
                stamp += 1
        try:
            try:
                os.fchmod(out, 0o600)
                io.write_all(out, tail)
                io.fsync(out)
            finally:
                io.close(out)
            io.fsync_dir(os.path.dirname(path))
        except BaseException:
            with suppress(OSError):
                io.unlink(target)  # a partial copy is no evidence; the log stays uncut
            raise
        return SetAside(target, len(tail))

    def _unreserve(self, session_id: str, fd: int) -> None:
        """Free the blocks reserved past the log's end (a same-size `ftruncate`, still under
        the writer lock), unless the log is not the size this writer left it. Best effort: a
        failure leaves them as a crash would, past the end, where no reader looks."""
        with suppress(OSError):
            size = self._io.size(fd)
            if size == self._sizes.get(session_id):
                self._io.ftruncate(fd, size)

    def _roll_back(self, fd: int, size: int, path: str, error: Exception) -> None:
        try:
            self._io.ftruncate(fd, size)
            self._io.fsync(fd)
        except Exception as failure:
            raise ExceptionGroup(
                f'failed to roll back append to "{path}"', [error, failure]
            ) from None

    def _materialize(self, session_id: str, meta: JsonObject, path: str, batch: bytes) -> None:
        """Create the log: header + first batch in a private temp file, linked into place."""
        io = self._io
        existing = self._lookup(session_id)
        if existing is not None and existing != path:
            raise SessionPersistenceError(
                f'session "{session_id}" is already stored under another project directory: '
                f'"{existing}"'
            )
        directory = os.path.dirname(path)
        self._make_dirs(directory)
        transient = self._lock_for_write(session_id, path)
        try:
            if os.path.lexists(path):
                raise SessionExistsError(
                    f'session "{session_id}" already has a persisted log at "{path}"'
                )
            header = header_line(meta)
            content = (
                (frames.compress_frame(header) + batch)
                if self.compression == "zstd"
                else (header + batch)
            )
            temp = f"{path}.{secrets.token_hex(6)}.tmp"
            fd = io.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
            os.fchmod(fd, fsguard.FILE_MODE)  # whatever the umask left
            try:
                try:
                    io.write_all(fd, content)
                    io.fsync(fd)
                    created = os.fstat(fd)
                finally:
                    io.close(fd)
                try:
                    io.link(temp, path)
                except FileExistsError:
                    raise SessionExistsError(
                        f'session "{session_id}" already has a persisted log at "{path}" '
                        "(another writer created it first)"
                    ) from None
                try:
                    io.fsync_dir(directory)
                except Exception as error:
                    self._unlink_created(path, error)
                    raise
            finally:
                try:
                    io.unlink(temp)
                except OSError:
                    pass
            self._sizes[session_id] = len(content)
            self._files[session_id] = (created.st_dev, created.st_ino)
        finally:
            if transient is not None:
                transient.release()

    def _unlink_created(self, path: str, error: Exception) -> None:
        """Undo a link whose directory entry could not be made durable."""
        try:
            self._io.unlink(path)
        except Exception as failure:
            raise ExceptionGroup(
                f'failed to roll back creation of "{path}"', [error, failure]
            ) from None

    def _make_dirs(self, directory: str) -> None:
        """Create the missing directories of `directory` (0700), fsyncing each parent; then
        check the root and everything below it down to `directory` by the storage rule."""
        for path in fsguard.missing_dirs(directory):
            try:
                self._io.mkdir(path)
            except FileExistsError:
                continue
            self._io.fsync_dir(os.path.dirname(path))
        fsguard.check_path(self._root, directory, leaf_is_dir=True)

    def _delete_stored(self, session_id: str) -> bool:
        path = self._lookup(session_id)
        if path is None:
            return False
        directory = os.path.dirname(path)
        os.unlink(path)
        self._io.fsync_dir(directory)
        self._sizes.pop(session_id, None)
        for kept in _set_aside_beside(path):
            os.unlink(kept.path)
        with suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, LOCK_NAME))
        with suppress(OSError):  # not empty: someone else's files stay, and so does the folder
            os.rmdir(directory)
            self._io.fsync_dir(os.path.dirname(directory))
        return True

    def _drop(self, session_id: str, owner: _Owner) -> None:
        if owner.fd >= 0:
            if owner.reserved:
                self._unreserve(session_id, owner.fd)
            self._io.close(owner.fd)
            owner.fd, owner.held, owner.reserve_at, owner.reserved = -1, None, 0, False
        if owner.lock is not None:
            owner.lock.release()
            owner.lock = None


@lru_cache(maxsize=1024)
def _log_path(root: str, cwd: str | None, session_id: str, name: str) -> str:
    """`<root>/<project>/<segment>/<name>`, memoized: every append needs it."""
    return os.path.join(root, project_dir(cwd), segment(session_id), name)


def _read_head(fd: int, *, zstd: bool) -> bytes:
    """The start of a log, read in 64 KiB pieces until it holds the whole header record."""
    head = os.read(fd, 65536)
    while not header_complete(head, zstd=zstd):
        more = os.read(fd, 65536)
        if not more:
            break
        head += more
    return head


def _read_all(fd: int, size: int) -> bytes:
    """A file's bytes from its start, read straight from `fd` (no buffered file object: no
    seek, no terminal check), up to one byte past `size`, its size when last seen: a file
    that grew or shrank since fails the caller's stat comparison and is read again."""
    parts: builtins.list[bytes] = []
    left = size + 1
    while left > 0:
        piece = os.read(fd, left)
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)


def _set_aside_beside(path: str) -> tuple[SetAside, ...]:
    """The `<log>.torn-<ms>` files earlier repairs left beside `path`, oldest first."""
    directory, name = os.path.split(path)
    prefix = name + TORN_SUFFIX
    found: builtins.list[tuple[int, SetAside]] = []
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return ()
    for entry in entries:
        stamp = entry.name[len(prefix) :]
        if entry.name.startswith(prefix) and stamp.isdigit():
            with suppress(OSError):
                size = entry.stat(follow_symlinks=False).st_size
                found.append((int(stamp), SetAside(entry.path, size)))
    return tuple(kept for _, kept in sorted(found, key=lambda item: item[0]))


def _sort_time(header: JsonObject) -> int:
    created = header.get("createdAt")
    return created if type(created) is int else 0


def problem_snapshot(name: str, path: str, error: Exception) -> Snapshot:
    """A listing row for an entry this backend refuses: `id` is its best-known name (the
    unescaped directory name), `problem` the refusal; loading that id raises it again."""
    header: JsonObject = {"version": 0, "id": name, "createdAt": 0, "problem": str(error)}
    return Snapshot(header, f"problem:{path}")
