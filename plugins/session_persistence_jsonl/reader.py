"""Decode a JSONL session log (raw or zstd) into its header, committed events and torn tail.

Only `\\n`-ended lines count; line 1 is the first after the header. What a bad line means
(committed corruption or the start of a torn tail) is the seam's rule for appended storage
(`plugins.session_persistence.records`, docs/persistence.md). In zstd logs every
complete frame must end on a line boundary, and a torn last frame is decoded best effort: its
good lines are `recovered` and the tail is cut back to the frame's start.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

import zstandard

from plugins.session.jsonutil import MAX_SAFE_INTEGER, loads
from plugins.session_persistence.compact import PackedBuilder, PackedEvents
from plugins.session_persistence.errors import SessionPersistenceCorruptionError
from plugins.session_persistence.packing import CHUNK_TAGS, check_row
from plugins.session_persistence.records import RecordSequence

from . import frames

__all__ = [
    "LogScan",
    "TornMarker",
    "header_complete",
    "parse_header",
    "read_header",
    "scan_raw",
    "scan_zstd",
]

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TornMarker:
    """What `commit_repair` needs: cut the file to `truncate_to`, then re-append `recovered`.

    `seen_size` is the file size the tail was observed at (the stale-writer check).
    """

    truncate_to: int
    recovered: list[JsonObject]
    seen_size: int


@dataclass(frozen=True, slots=True)
class LogScan:
    """A decoded log: the header record, the committed events (kept as read, docs/event-log.md)
    and the torn tail (if any)."""

    header: JsonObject
    events: PackedEvents
    marker: TornMarker | None


#: Raw logs are split into lines this many bytes at a time.
_WINDOW: Final = 1 << 22

#: Logs at least this large are decoded with the cyclic GC paused (it would rescan every new
#: event dict many times over; reference counting still frees garbage).
BULK_BYTES: Final = 1 << 20

_bulk_lock = threading.Lock()
_bulk_users = 0
_bulk_restore = False


@contextmanager
def _bulk(size: int) -> Iterator[None]:
    """Pause the cyclic garbage collector while a large log is decoded (process-wide, counted
    across threads, restored by the last user)."""
    global _bulk_users, _bulk_restore
    if size < BULK_BYTES:
        yield
        return
    with _bulk_lock:
        if _bulk_users == 0:
            _bulk_restore = gc.isenabled()
            gc.disable()
        _bulk_users += 1
    try:
        yield
    finally:
        with _bulk_lock:
            _bulk_users -= 1
            if _bulk_users == 0 and _bulk_restore:
                gc.enable()


def _corrupt(message: str) -> SessionPersistenceCorruptionError:
    return SessionPersistenceCorruptionError(message)


def parse_header(line: bytes) -> JsonObject:
    """The header record of line `line` (without its newline).

    A header whose integer `version` is not 0 is returned without shape checks (the coordinator
    refuses it with the format texts); a v0 header must have the header shape.
    """
    try:
        header = loads(line.decode("utf-8"))
    except ValueError:
        raise _corrupt("corrupt session log: header line is not valid JSON") from None
    if type(header) is dict and type(header.get("version")) is int and header["version"] != 0:
        return header
    if not _is_header(header):
        raise _corrupt("corrupt session log: first line is not a session header")
    if "sandboxMode" in header or "approvalPolicy" in header:
        raise _corrupt("session header uses retired policy baseline fields")
    return header


_STRING_FIELDS: Final = ("cwd", "parentSession", "agentPreset")


def _is_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def _is_header(header: object) -> TypeGuard[JsonObject]:
    """The v0 header line shape: `type`, `version`, `id`, `createdAt`, and valid optional
    fields (`delegationDepth` may be absent: it reads as 0)."""
    return (
        type(header) is dict
        and header.get("type") == "session"
        and header.get("version") == 0
        and type(header["version"]) is int
        and type(header.get("id")) is str
        and _is_count(header.get("createdAt"))
        and all(
            _is_count(header[key]) for key in ("delegationDepth", "seedLength") if key in header
        )
        and all(type(header[key]) is str for key in _STRING_FIELDS if key in header)
        and header.get("origin", "subagent") == "subagent"
    )


def header_complete(head: bytes, *, zstd: bool) -> bool:
    """Whether `head` (a prefix of a log) holds the whole header line (or frame)."""
    if not zstd:
        return b"\n" in head
    try:
        found = frames.scan(head, limit=1)
    except frames.FrameError:
        return True  # let `read_header` report it
    return bool(found) and found[0].complete


def read_header(head: bytes, *, zstd: bool) -> JsonObject:
    """The header record from a prefix of a log holding at least its first line (or frame)."""
    if zstd:
        return _zstd_header(memoryview(head))[0]
    end = head.find(b"\n")
    if end < 0:
        raise _corrupt("empty or header-less session log")
    return parse_header(head[:end])


def _zstd_header(view: memoryview) -> tuple[JsonObject, frames.Frame]:
    try:
        found = frames.scan(view, limit=1)
    except frames.FrameError as error:
        raise _corrupt(f"corrupt Zstandard session log: {error}") from None
    if not found or not found[0].complete:
        raise _corrupt("empty or header-less Zstandard session log")
    first = _decompress(view, found[0])
    if not first.endswith(b"\n") or first.index(b"\n") != len(first) - 1:
        raise _corrupt("corrupt Zstandard session log: first frame is not exactly one header line")
    return parse_header(first[:-1]), found[0]


class _Lines:
    """Feeds complete lines in order to the seam's record rule (appended storage can tear) and
    keeps each committed one as its bytes."""

    __slots__ = ("built", "line", "records")

    def __init__(self) -> None:
        self.line = 0
        self.records = RecordSequence(can_tear=True, gap=self._gap, keep=False)
        self.built = PackedBuilder()

    @property
    def count(self) -> int:
        """Committed events so far."""
        return self.records.count

    def _gap(self, expected: int, got: str) -> str:
        return (
            f"corrupt session log: seq gap in committed region at line {self.line} "
            f"(expected {expected}, got {got})"
        )

    def feed(self, text: bytes | memoryview, start: int) -> bool:
        """Consume one line, bytes `start..` of the current buffer; True iff it joined the
        committed prefix."""
        self.line += 1
        try:
            record = loads(str(text, "utf-8"))
            if type(record) is not dict or type(record.get("type")) is not str:
                raise ValueError("not a storage record")
            row = record["type"] in CHUNK_TAGS
            count = check_row(record) if row else 1
        except ValueError:
            self.records.bad(f"corrupt session log: unparsable committed event at line {self.line}")
            return False
        joined = self.records.add_row(record["seq0"], count) if row else self.records.add((record,))
        if joined:
            self.built.add(start, start + len(text), count, row=row)
        return joined


def scan_raw(data: bytes) -> LogScan:
    """Decode a raw (`session.jsonl`) log."""
    with _bulk(len(data)):
        return _scan_raw(data)


def _scan_raw(data: bytes) -> LogScan:
    header = read_header(data, zstd=False)
    end = data.index(b"\n")
    if header["version"] != 0:
        return LogScan(header, PackedBuilder().build(), None)
    lines = _Lines()
    lines.built.buffer(data)
    committed = position = end + 1
    # Split window by window, never copying the whole rest at once (P12: a huge torn tail);
    # a line longer than a window is fed as a view of `data`.
    view = memoryview(data)
    while True:
        stop = data.rfind(b"\n", position, position + _WINDOW)
        if stop < 0:
            stop = data.find(b"\n", position + _WINDOW)
            if stop < 0:
                break
            if lines.feed(view[position:stop], position):
                committed = stop + 1
            position = stop + 1
            continue
        for text in data[position:stop].split(b"\n"):
            joined = lines.feed(text, position)
            position += len(text) + 1
            if joined:
                committed = position
    marker = None if committed == len(data) else TornMarker(committed, [], len(data))
    return LogScan(header, lines.built.build(), marker)


def scan_zstd(data: bytes) -> LogScan:
    """Decode a zstd (`session.jsonl.zstd`) log."""
    with _bulk(len(data) * 8):
        return _scan_zstd(data)


def _scan_zstd(data: bytes) -> LogScan:
    view = memoryview(data)
    header, _ = _zstd_header(view)
    if header["version"] != 0:
        return LogScan(header, PackedBuilder().build(), None)
    try:
        found = frames.scan(view)
    except frames.FrameError as error:
        raise _corrupt(f"corrupt Zstandard session log: {error}") from None
    lines = _Lines()
    cut: tuple[int, int] | None = None  # (frame start, events before that frame)
    for number, frame in enumerate(found[1:], start=2):
        if frame.complete:
            try:
                text = frames.decompress_frame(view[frame.start : frame.end])
            except zstandard.ZstdError:
                # The last complete frame failing its checksum is a power-cut tail
                # (docs/storage-safety.md): torn, and nothing of it is recovered.
                if not _last_complete(found, number):
                    raise _undecodable(frame) from None
                cut = (frame.start, lines.count) if cut is None else cut
                break
            if text and not text.endswith(b"\n"):
                raise _corrupt(
                    "corrupt Zstandard session log: complete frame contains a torn JSONL record"
                )
        else:
            _refuse_swallowed_frames(view, frame, number)
            text = frames.decompress_torn(view[frame.start : frame.end])
        before = lines.count
        lines.built.buffer(text)
        offset = 0
        for part in text.split(b"\n")[:-1]:
            if not lines.feed(part, offset) and cut is None:
                cut = (frame.start, before)
            offset += len(part) + 1
        if not frame.complete and cut is None:
            cut = (frame.start, before)
    events = lines.built.build()
    if cut is None:
        return LogScan(header, events, None)
    start, before = cut
    return LogScan(header, events, TornMarker(start, list(events[before:]), len(data)))


def _last_complete(found: list[frames.Frame], number: int) -> bool:
    """Whether frame `number` (1-based) is complete and no complete frame follows it."""
    return not any(later.complete for later in found[number:])


def _refuse_swallowed_frames(view: memoryview, frame: frames.Frame, number: int) -> None:
    """A torn frame is the last batch, cut short. If complete frames holding a `turn/end` follow
    inside its byte range, damage to its block sizes made it swallow committed batches."""
    data = bytes(view[frame.start : frame.end])
    at = data.find(frames.MAGIC, 1)
    while at >= 0:
        try:
            later = [f for f in frames.scan(data[at:]) if f.complete]
            texts = [frames.decompress_frame(data[at + f.start : at + f.end]) for f in later]
        except (frames.FrameError, zstandard.ZstdError):
            texts = []
        for text in texts:
            for line in text.split(b"\n")[:-1]:
                if _holds_turn_end(line):
                    raise _corrupt(
                        f"corrupt Zstandard session log: frame {number} at byte {frame.start} "
                        f"runs into a later complete frame at byte {frame.start + at}"
                    )
        at = data.find(frames.MAGIC, at + 1)


def _holds_turn_end(line: bytes) -> bool:
    try:
        record = loads(line.decode("utf-8"))
        return type(record) is dict and record.get("type") == "turn/end"
    except ValueError:
        return False


def _decompress(view: memoryview, frame: frames.Frame) -> bytes:
    try:
        return frames.decompress_frame(view[frame.start : frame.end])
    except zstandard.ZstdError:
        raise _undecodable(frame) from None


def _undecodable(frame: frames.Frame) -> SessionPersistenceCorruptionError:
    return _corrupt(f"corrupt Zstandard session log: frame at byte {frame.start} failed validation")
