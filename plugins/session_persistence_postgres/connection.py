"""Connecting to PostgreSQL: the asyncio requirement, clear connection errors that never show
the DSN's password, and the advisory-lock key of a session id."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict

from plugins.session_persistence.errors import SessionPersistenceError

__all__ = [
    "ASYNCIO_REQUIRED",
    "LOCK_KEEPALIVE",
    "MAX_ID_BYTES",
    "DatabaseError",
    "check_id",
    "configure",
    "connect",
    "connection_kwargs",
    "describe",
    "lock_key",
    "require_asyncio",
    "scrub",
]

#: The refusal on any other event loop (psycopg's async API is asyncio-only).
ASYNCIO_REQUIRED: Final = "session-persistence-postgres requires the asyncio backend"

_URI_PASSWORD: Final = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KEYWORD_PASSWORD: Final = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


class DatabaseError(SessionPersistenceError):
    """Raised when PostgreSQL cannot be reached or refuses a connection or a statement."""


def require_asyncio() -> None:
    """Raise `SessionPersistenceError(ASYNCIO_REQUIRED)` unless an asyncio loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise SessionPersistenceError(ASYNCIO_REQUIRED) from None


#: The longest session id stored, in bytes of UTF-8: every id is a btree index key, and an
#: index entry holds about 2.7 KB.
MAX_ID_BYTES: Final = 2048


def check_id(session_id: str) -> None:
    """Refuse an id too long to be an index key, before anything touches the database."""
    size = len(session_id.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise SessionPersistenceError(
            f"session id of {size} bytes is too long for session-persistence-postgres: ids are "
            f"index keys of at most {MAX_ID_BYTES} bytes of UTF-8 (starts with "
            f"{session_id[:40]!r})"
        )


def lock_key(session_id: str) -> int:
    """The advisory-lock key of a session: the first 8 bytes of SHA-256(`dsh-session:` + id),
    big-endian, as a signed 64-bit integer."""
    digest = hashlib.sha256(("dsh-session:" + session_id).encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def _password(dsn: str) -> str | None:
    try:
        return conninfo_to_dict(dsn).get("password") or None  # type: ignore[return-value]
    except psycopg.Error:
        return None


def scrub(text: str, dsn: str) -> str:
    """`text` on one line, without the DSN's password (nor anything shaped like a password in
    a DSN)."""
    password = _password(dsn)
    if password:
        text = text.replace(password, "***")
    text = _URI_PASSWORD.sub(r"\1***@", text)
    return " ".join(_KEYWORD_PASSWORD.sub(r"\1***", text).split())


def describe(dsn: str) -> str:
    """Where a DSN points, for messages: `user@host:port/dbname` (libpq defaults shown as-is)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an unparsable DSN"
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "default host"
    port = params.get("port")
    target = f"{host}:{port}" if port else str(host)
    dbname = params.get("dbname")
    return f"{f'{user}@' if user else ''}{target}{f'/{dbname}' if dbname else ''}"


def connection_kwargs(dsn: str, connect_timeout_s: int) -> dict[str, Any]:
    """Keyword arguments of every connection: autocommit (transactions are explicit), and
    `connect_timeout` unless the DSN sets one. An unparsable DSN raises `DatabaseError` without
    echoing it (libpq's parse errors quote the whole DSN, password included)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        raise DatabaseError(
            "session-persistence-postgres: the DSN is not a valid PostgreSQL connection string "
            "or URI"
        ) from None
    timeout = {} if "connect_timeout" in params else {"connect_timeout": connect_timeout_s}
    return {"autocommit": True, **timeout}


async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
    """Per-connection settings: `synchronous_commit = on` (a COMMIT returns once durable)."""
    await conn.execute("SET synchronous_commit = on")


#: TCP keepalive of the writer-lock connection (unless the DSN sets its own): a peer that
#: vanished without closing is noticed after about idle + interval x count = 11 s.
LOCK_KEEPALIVE: Final = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


async def connect(
    dsn: str, *, connect_timeout_s: int, keepalive: bool = False
) -> psycopg.AsyncConnection[Any]:
    """A configured connection outside any pool; failures raise `DatabaseError` naming the
    server (never the password). `keepalive` adds `LOCK_KEEPALIVE` where the DSN is silent."""
    kwargs = connection_kwargs(dsn, connect_timeout_s)
    if keepalive:
        params = conninfo_to_dict(dsn)
        kwargs.update({key: value for key, value in LOCK_KEEPALIVE.items() if key not in params})
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, **kwargs)
    except psycopg.Error as error:
        raise DatabaseError(
            f"session-persistence-postgres: cannot connect to PostgreSQL at {describe(dsn)}: "
            f"{scrub(str(error), dsn)}"
        ) from None
    try:
        await configure(conn)
    except BaseException:
        await conn.close()
        raise
    return conn
