"""PostgreSQL for tests: the DSN, one reachability probe per run, skip-or-fail, fresh schemas.

- `DSN`: the server, `$DSH_TEST_POSTGRES_DSN`, default `postgresql://postgres@127.0.0.1:5432/test`.
- `require_postgres()`: the DSN tests should use if the server answers; otherwise `pytest.skip`
  with the reason, or `pytest.fail` when `DSH_REQUIRE_POSTGRES=1` (CI that must not skip
  silently). That DSN names a database of this test process's own (`dsh_test_<pid>_<hex>`,
  created on first use, dropped at exit) when the role may create databases, else `DSN`'s:
  advisory locks are per database and the writer-lock key depends only on the session id, so
  concurrent test runs sharing a database would lock each other's same-named sessions.
- `fresh_schema()`: a context manager yielding a new schema name (`dsh_test_<pid>_<hex>`) in that
  database, dropped with everything in it on exit.
- `postgres_fixture(scope)`: a pytest fixture factory yielding a `PostgresTarget` (DSN + fresh
  schema) per test (`"function"`) or per run (`"session"`)::

      from postgres_support import postgres_fixture
      postgres = postgres_fixture()            # in a test module or a conftest.py
"""

from __future__ import annotations

import atexit
import functools
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from plugins.session_persistence_postgres.connection import describe, scrub

__all__ = [
    "DSN",
    "PostgresTarget",
    "drop_schema",
    "fresh_schema",
    "postgres_fixture",
    "probe",
    "require_postgres",
    "run_dsn",
    "schema_name",
]

DSN = os.environ.get("DSH_TEST_POSTGRES_DSN") or "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class PostgresTarget:
    """Where a test's backend lives: `dsn` and a schema of its own."""

    dsn: str
    schema: str

    def config(self, **extra: Any) -> dict[str, Any]:
        """Plugin config for `dsh-session-persistence-postgres` (`dsn`, `schema`, extras)."""
        return {"dsn": self.dsn, "schema": self.schema, **extra}


@functools.cache
def probe() -> str | None:
    """None if the server at `DSN` answers a query, else why not (once per run)."""
    try:
        with psycopg.connect(DSN, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as error:
        return (
            f"PostgreSQL at {describe(DSN)} (DSH_TEST_POSTGRES_DSN) does not answer: "
            f"{scrub(str(error), DSN)}"
        )
    return None


def require_postgres() -> str:
    """The DSN of this run's database; skip the test when the server does not answer (fail if
    DSH_REQUIRE_POSTGRES=1)."""
    reason = probe()
    if reason is not None:
        if os.environ.get("DSH_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (DSH_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    return run_dsn()


def schema_name() -> str:
    """A new schema (or database) name, unique to this process and call."""
    return f"dsh_test_{os.getpid()}_{secrets.token_hex(4)}"


@functools.cache
def run_dsn() -> str:
    """A database of this process's own, dropped at exit; `DSN` itself if it cannot be made."""
    database = schema_name()
    try:
        with psycopg.connect(DSN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    except psycopg.errors.InsufficientPrivilege:
        return DSN
    atexit.register(_drop_database, database)
    return make_conninfo(DSN, dbname=database)


def _drop_database(database: str) -> None:
    with psycopg.connect(DSN, autocommit=True, connect_timeout=3) as conn:
        statement = "DROP DATABASE IF EXISTS {} WITH (FORCE)"
        conn.execute(sql.SQL(statement).format(sql.Identifier(database)))


def drop_schema(schema: str) -> None:
    """Drop `schema` and everything in it from this run's database (no error if absent)."""
    with psycopg.connect(run_dsn(), autocommit=True, connect_timeout=3) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A fresh schema name for the block (the backend creates it); dropped afterwards."""
    require_postgres()
    schema = schema_name()
    try:
        yield schema
    finally:
        drop_schema(schema)


def postgres_fixture(
    scope: Literal["function", "session"] = "function", name: str | None = None
) -> Callable[..., Any]:
    """A pytest fixture yielding a `PostgresTarget` with a fresh schema per `scope`."""

    @pytest.fixture(scope=scope, name=name)
    def postgres() -> Iterator[PostgresTarget]:
        with fresh_schema() as schema:
            yield PostgresTarget(run_dsn(), schema)

    return postgres
