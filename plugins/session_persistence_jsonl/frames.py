"""Zstandard frame structure: split a compressed log into frames without decompressing it.

A log is a sequence of frames (RFC 8878 §3.1.1): magic `0xFD2FB528`, a frame header descriptor,
optional window descriptor, dictionary id and content size, blocks (3-byte headers), and a 4-byte
content checksum (optional in the format; this backend always writes it). The scan only reads
headers, so a torn last frame (EOF inside it) is told apart from corruption (bad magic, the
reserved bit, a reserved block type) cheaply.

Bytes that are not a frame after the last complete frame and up to the end of the data (the
zero-filled tail a power cut leaves on ext4 or XFS) are a torn tail, not corruption: structural
damage is corruption only when a later complete frame (checksum verified) follows it
(docs/storage-safety.md).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

import zstandard

__all__ = [
    "MAGIC",
    "Frame",
    "FrameError",
    "compress_frame",
    "decompress_frame",
    "decompress_torn",
    "scan",
    "scan_strict",
]

#: The frame magic number 0xFD2FB528, little-endian.
MAGIC: Final = b"\x28\xb5\x2f\xfd"
_FCS_BYTES: Final = (0, 2, 4, 8)
_DICT_BYTES: Final = (0, 1, 2, 4)
_LEVEL: Final = 3
_TORN_PIECE: Final = 16384


class FrameError(ValueError):
    """Raised when the bytes are not a sequence of zstd frames (corruption)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: bytes `[start, end)`; `complete` is False for a frame cut by EOF."""

    start: int
    end: int
    complete: bool


def scan(data: bytes | memoryview, *, limit: int | None = None) -> list[Frame]:
    """Split `data` into frames (at most `limit`); only the last one may be incomplete (torn).

    Raises `FrameError` naming the byte offset for bad magic, the reserved header bit or a
    reserved block type, when a later complete frame follows (the content checksum is optional,
    as in the format: docs/legacy-logs.md); without one, the bytes from that frame's start to the
    end are returned as one torn frame.
    """
    frames: list[Frame] = []
    try:
        _scan(data, limit, frames)
    except FrameError:
        if not frames:  # the first (header) frame is never a tail
            raise
        start = frames[-1].end
        if _complete_frame_after(data, start + 1):
            raise
        frames.append(Frame(start, len(data), False))
    return frames


def _complete_frame_after(data: bytes | memoryview, offset: int) -> bool:
    """Whether a complete frame whose checksum verifies starts at or after `offset`."""
    if isinstance(data, memoryview) and type(data.obj) is bytes and data.nbytes == len(data.obj):
        raw: bytes | memoryview = data.obj  # the whole underlying object: search it in place
    else:
        raw = data
    search = raw if type(raw) is bytes else bytes(raw)
    view = memoryview(search)
    at = search.find(MAGIC, offset)
    while at >= 0:
        try:
            found = scan_strict(view[at:], limit=1)
            if found and found[0].complete:
                decompress_frame(view[at : at + found[0].end])
                return True
        except (FrameError, zstandard.ZstdError):
            pass
        at = search.find(MAGIC, at + 1)
    return False


def scan_strict(data: bytes | memoryview, *, limit: int | None = None) -> list[Frame]:
    """Like `scan`, but any structural damage raises `FrameError` (no tail tolerance)."""
    frames: list[Frame] = []
    _scan(data, limit, frames)
    return frames


def _scan(data: bytes | memoryview, limit: int | None, frames: list[Frame]) -> None:
    size = len(data)
    pos = 0
    while pos < size and (limit is None or len(frames) < limit):
        start = pos
        if size - pos < 5:
            if bytes(data[pos:]) != MAGIC[: size - pos]:
                raise FrameError(f"invalid frame magic at byte {start}")
            frames.append(Frame(start, size, False))
            break
        if bytes(data[pos : pos + 4]) != MAGIC:
            raise FrameError(f"invalid frame magic at byte {start}")
        descriptor = data[pos + 4]
        if descriptor & 0x08:
            raise FrameError(f"reserved frame-header bit at byte {pos + 4}")
        checksum = 4 if descriptor & 0x04 else 0
        single_segment = bool(descriptor & 0x20)
        fcs = _FCS_BYTES[descriptor >> 6]
        if fcs == 0 and single_segment:
            fcs = 1
        pos += 5 + (0 if single_segment else 1) + _DICT_BYTES[descriptor & 0x03] + fcs
        torn = False
        while True:
            if pos + 3 > size:
                torn = True
                break
            header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
            block_type = (header >> 1) & 0x03
            if block_type == 3:
                raise FrameError(f"reserved block type at byte {pos}")
            pos += 3 + (1 if block_type == 1 else header >> 3)
            if pos > size:
                torn = True
                break
            if header & 0x01:
                break
        if not torn:
            pos += checksum
            torn = pos > size
        if torn:
            frames.append(Frame(start, size, False))
            break
        frames.append(Frame(start, pos, True))


_local = threading.local()


def compress_frame(plaintext: bytes) -> bytes:
    """One checksummed frame holding `plaintext` (with its content size)."""
    compressor: zstandard.ZstdCompressor | None = getattr(_local, "compressor", None)
    if compressor is None:
        compressor = zstandard.ZstdCompressor(level=_LEVEL, write_checksum=True)
        _local.compressor = compressor
    return compressor.compress(plaintext)


def _decompressor() -> zstandard.ZstdDecompressor:
    decompressor: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if decompressor is None:
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def decompress_frame(frame: bytes | memoryview) -> bytes:
    """Decompress one complete frame, verifying its checksum; raises `zstandard.ZstdError`."""
    decompressor = _decompressor().decompressobj()
    out = decompressor.decompress(bytes(frame))
    if not decompressor.eof:
        raise zstandard.ZstdError("frame ended before its last block")
    return out


def decompress_torn(frame: bytes | memoryview) -> bytes:
    """Best effort for a frame cut by EOF: whatever its complete blocks decode to."""
    decompressor = _decompressor().decompressobj()
    out: list[bytes] = []
    for piece in range(0, len(frame), _TORN_PIECE):
        try:
            out.append(decompressor.decompress(bytes(frame[piece : piece + _TORN_PIECE])))
        except zstandard.ZstdError:
            break
    return b"".join(out)
