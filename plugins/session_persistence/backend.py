"""The hook interface a storage engine implements to sit behind the persistence seam.

The write coordinator (`coordinator.py`) owns ordering, batching, adoption and repair decisions,
and the seam's rule modules (`records`, `header`, `liveness`, `formats`, `home`) decide what
stored data means; a backend only moves bytes or rows, runs transactions and locks. Every
method may be called concurrently for *different* ids; the coordinator never overlaps two calls
for the same id.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Location:
    """Where a backend keeps (or would keep) a session: `kind` is e.g. "file" or "database"."""

    kind: str
    path: str


@dataclass(frozen=True, slots=True)
class SetAside:
    """Bytes a repair cut from a log and kept beside it: `size` bytes in the file at `path`."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class Owner:
    """The live writer holding a session: its process id and host (None when unrecorded)."""

    pid: int | None
    host: str | None


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A stored session as read from storage.

    `meta` is the header without its storage tag (`version, id, createdAt, cwd?, ...`, with
    `delegationDepth` defaulted to 0). `events` are the committed events (packed rows
    expanded; a backend may keep them compact and decode on read, docs/event-log.md), including
    any best-effort `recovered` events of a torn tail. `torn_marker` is
    opaque to the coordinator: non-None means the tail is torn and `commit_repair` must be called
    with it before the log is writable; `torn_bytes` is how many bytes that repair will cut (and
    keep beside the log). `set_aside` lists what earlier repairs kept.
    """

    meta: JsonObject
    events: Sequence[JsonObject]
    revision: str
    torn_marker: object | None = None
    torn_bytes: int = 0
    set_aside: tuple[SetAside, ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A header and an opaque revision (stable while unchanged, new after any write)."""

    header: JsonObject
    revision: str


@runtime_checkable
class PersistenceBackend(Protocol):
    """Storage hooks behind `sessionPersistence` (docs/persistence.md)."""

    #: `session-persistence-jsonl` | `session-persistence-sqlite` | `session-persistence-postgres`
    name: str

    def locate(self, meta: JsonObject) -> Location | None:
        """Where `meta`'s session lives; no I/O."""

    async def read_raw(self, session_id: str) -> bytes:
        """The stored artifact verbatim, or raise `SessionPersistenceError` with
        `this session persistence backend does not expose raw artifacts`."""

    async def load_stored(self, session_id: str) -> StoredLog | None:
        """Read and validate; None when nothing is stored. Corruption raises
        `SessionPersistenceCorruptionError`; format refusals `SessionFormatUnsupportedError`."""

    async def read_stored_revision(self, session_id: str) -> str | None:
        """The current revision without decoding events; None when nothing is stored."""

    async def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> None:
        """Make `events` durable as one unit. When not materialized, create the log with the
        header and this first batch atomically. Honour the writer lock and the stale-writer check
        (docs/backends.md) for `meta["id"]`."""

    async def commit_repair(
        self, meta: JsonObject, marker: object | None, closers: Sequence[JsonObject]
    ) -> SetAside | None:
        """Drop the torn tail described by `marker` (if any), keeping its bytes beside the log,
        re-append what it recovered, then append `closers`; durable on return. Returns where the
        cut bytes were kept (None when nothing was cut)."""

    async def delete_stored(self, session_id: str) -> bool:
        """Remove everything stored for `session_id` (events, header, what repairs set aside);
        False when nothing was stored. Runs under the writer lock the coordinator took, so a
        session another process holds is refused with `SessionLockedError` before this."""

    async def list(self) -> list[JsonObject]:
        """Headers of every materialized session."""

    async def list_snapshots(self) -> builtins.list[Snapshot]:
        """Headers with revisions."""

    async def acquire_writer(self, session_id: str) -> None:
        """Take the cross-process writer lock for a live session, without waiting; raise
        `SessionLockedError` naming the holder. Re-entrant within one backend instance."""

    async def release_writer(self, session_id: str) -> None:
        """Release a lock taken by `acquire_writer` (no-op when not held)."""

    async def owner(self, session_id: str) -> Owner | None:
        """The live writer holding `session_id`'s lock in another process or instance, or None
        when the lock is free (or held by this instance); reads only, takes nothing."""

    async def lock_record(self, session_id: str) -> Owner | None:
        """The holder the lock storage records for `session_id`, whether or not it still holds
        the lock (a crashed writer's record stays until the next writer replaces it); None when
        nothing is recorded or the engine's lock cannot outlive its holder."""

    async def store_identity(self) -> str:
        """The store's random id, created once with the store and kept in it (stable across
        processes and instances over the same storage; docs/tools-and-cancellation.md)."""

    async def aclose(self) -> None:
        """Release every lock and resource."""


class LiveEncoder(Protocol):
    """One live session's write path on a backend that encodes ahead: each event is encoded
    when it is admitted (`admit`, on the loop thread, in seq order), so a write only joins
    what is ready. The bytes stored are exactly `append_batch`'s: what was not encoded ahead
    (an event admitted before binding, a batch retried after a failure) is encoded then."""

    def admit(self, event: JsonObject) -> None:
        """Encode `event` ahead of its write; never raises (a failure is met at the write)."""

    def append_batch(
        self, meta: JsonObject, events: Sequence[JsonObject], *, is_materialized: bool
    ) -> Awaitable[None]:
        """`PersistenceBackend.append_batch` of events this encoder admitted (or not). Once
        called it runs to completion even when its caller is cancelled: it never suspends
        except in a shielded wait for the write (the coordinator adds no shield of its own)."""


@runtime_checkable
class EncodesAhead(Protocol):
    """A backend whose live writes may be encoded ahead (`LiveEncoder`), one per binding."""

    def live_encoder(self) -> LiveEncoder:
        """A new encoder for one live session."""


@runtime_checkable
class ProbesOwners(Protocol):
    """A backend that probes many ids' owners at once cheaper than one by one (JSONL: one read
    of the kernel's lock table for all of them)."""

    async def owners(self, session_ids: Sequence[str]) -> dict[str, Owner | None]:
        """`owner` of each id; an id whose probe failed is left out (its `owner` raises)."""


@runtime_checkable
class LoadsMany(Protocol):
    """A backend that reads several stored logs in one call cheaper than one by one (JSONL:
    one trip to its I/O thread and one scan of the root for them all)."""

    async def load_many(self, session_ids: Sequence[str]) -> list[StoredLog | Exception | None]:
        """`load_stored` of the first of `session_ids` and of as many following ones as the
        backend reads in the same call (a bound on their bytes keeps a batch of large logs out
        of memory); per id, in order, its log, None, or the error its `load_stored` raises."""
