"""The session header as stored and the meta the seam hands around: one mapping for every
backend (docs/persistence.md).

A stored header is the meta with the storage tag `"type": "session"` first; keys follow
`HEADER_KEYS` order; a v0 header without `delegationDepth` means depth 0 (written as 0, read
back as 0).
"""

from __future__ import annotations

from typing import Any

from plugins.session.events import HEADER_KEYS

JsonObject = dict[str, Any]


def meta_of(header: JsonObject) -> JsonObject:
    """The meta of a stored header (tag dropped, `delegationDepth` defaulted on v0 logs).

    A header of another version is returned as stored, for the format refusal to name it.
    """
    meta = {key: value for key, value in header.items() if key != "type"}
    if header.get("version") == 0:
        meta.setdefault("delegationDepth", 0)
    return meta


def stored_header(meta: JsonObject) -> JsonObject:
    """The header record a backend writes for `meta`: the tag, `version` 0, then the known keys
    in order, `delegationDepth` written as 0 when absent."""
    header: JsonObject = {"type": "session", "version": 0}
    for key in HEADER_KEYS[1:]:
        if key in meta:
            header[key] = meta[key]
        elif key == "delegationDepth":
            header[key] = 0
    return header


def header_columns(meta: JsonObject) -> JsonObject:
    """The values of every `HEADER_KEYS` field of `meta` (None when absent) for a row store;
    `version` 0 and `delegationDepth` 0 when absent."""
    header = stored_header(meta)
    return {key: header.get(key) for key in HEADER_KEYS}


def meta_of_columns(values: tuple[Any, ...] | list[Any]) -> JsonObject:
    """The meta of header columns read back in `HEADER_KEYS` order (NULLs omitted)."""
    meta: JsonObject = {"version": values[0], "id": values[1]}
    for key, value in zip(HEADER_KEYS[2:], values[2:], strict=True):
        if value is not None:
            meta[key] = value
    return meta_of(meta)
