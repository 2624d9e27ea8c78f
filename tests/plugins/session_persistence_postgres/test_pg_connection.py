"""Connecting: the asyncio requirement, clear connection errors without the password, Config."""

from __future__ import annotations

import socket

import postgres_support
import pytest
from pg_helpers import backend
from postgres_support import DSN, PostgresTarget, require_postgres
from psycopg.conninfo import make_conninfo
from pydantic import ValidationError

import plugins.session
import plugins.session_persistence_postgres as pg
from framework import Context
from plugins.session_persistence.errors import SessionPersistenceError
from plugins.session_persistence_postgres import ASYNCIO_REQUIRED, DatabaseError, PostgresBackend
from plugins.session_persistence_postgres.connection import scrub

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

PASSWORD = "s3cret-Pa55word"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_is_refused_by_the_backend_and_the_plugin(anyio_backend: str) -> None:
    with pytest.raises(SessionPersistenceError) as caught:
        PostgresBackend(DSN)
    assert str(caught.value) == ASYNCIO_REQUIRED
    assert ASYNCIO_REQUIRED == "session-persistence-postgres requires the asyncio backend"
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        with pytest.raises(Exception) as applied:
            await ctx.plugin(pg, {"dsn": DSN})
    assert ASYNCIO_REQUIRED in str(applied.value)


def test_the_backend_needs_a_running_event_loop() -> None:
    with pytest.raises(SessionPersistenceError, match="requires the asyncio backend"):
        PostgresBackend(DSN)


async def test_unreachable_server_is_named_without_the_password() -> None:
    port = closed_port()
    b = PostgresBackend(f"postgresql://someone:{PASSWORD}@127.0.0.1:{port}/test", schema="x")
    with pytest.raises(DatabaseError) as caught:
        await b.open()
    text = str(caught.value)
    assert PASSWORD not in text
    assert text.startswith(
        f"session-persistence-postgres: cannot connect to PostgreSQL at someone@127.0.0.1:{port}"
        "/test: "
    )
    assert "Connection refused" in text
    await b.aclose()


async def test_bad_credentials_are_named_without_the_password() -> None:
    dsn = make_conninfo(require_postgres(), user="no_such_role_dsh", password=PASSWORD)
    b = PostgresBackend(dsn, schema="x")
    with pytest.raises(DatabaseError) as caught:
        await b.open()
    text = str(caught.value)
    assert PASSWORD not in text
    assert 'role "no_such_role_dsh"' in text or "authentication failed" in text
    await b.aclose()


async def test_an_unparsable_dsn_is_refused_without_echoing_it() -> None:
    b = PostgresBackend(f"postgresql://a:{PASSWORD}@[bad", schema="x")
    with pytest.raises(DatabaseError) as caught:
        await b.open()
    assert str(caught.value) == (
        "session-persistence-postgres: the DSN is not a valid PostgreSQL connection string or URI"
    )
    await b.aclose()


async def test_plugin_apply_reports_the_unreachable_server() -> None:
    dsn = f"postgresql://u:{PASSWORD}@127.0.0.1:{closed_port()}/test"
    async with Context() as ctx:
        await ctx.plugin(plugins.session)
        with pytest.raises(Exception) as caught:
            await ctx.plugin(pg, {"dsn": dsn})
    assert "cannot connect to PostgreSQL" in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_scrub_removes_passwords_in_every_dsn_shape() -> None:
    keyword = f"host=h password='{PASSWORD} x' user=u"
    assert scrub(f"bad: {keyword}", keyword) == "bad: host=h password=*** user=u"
    uri = f"postgresql://u:{PASSWORD}@h/db"
    assert scrub(f'in URI: "{uri}"', uri) == 'in URI: "postgresql://u:***@h/db"'
    assert PASSWORD not in scrub(f"echo {PASSWORD}", uri)


def test_config_defaults_aliases_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pg.name == "session-persistence-postgres"
    assert pg.inject == ["sessions"]
    config = pg.Config()
    assert (config.dsn, config.db_schema, config.pool_max_size) == (None, "dsh", 10)
    assert config.write_batch_max_delay_ms == 200
    parsed = pg.Config.model_validate({"schema": "s2", "poolMaxSize": 3, "dsn": ""})
    assert (parsed.db_schema, parsed.pool_max_size, parsed.dsn) == ("s2", 3, "")
    for bad in ({"pool_max_size": 0}, {"schema": ""}, {"dns": "x"}):
        with pytest.raises(ValidationError):
            pg.Config.model_validate(bad)


async def test_config_backend_reads_the_dsn_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, postgres: PostgresTarget
) -> None:
    monkeypatch.setenv("DSH_POSTGRES_DSN", postgres.dsn)
    made = pg.Config.model_validate({"schema": postgres.schema}).backend()
    assert made.dsn == postgres.dsn
    await made.open()
    assert await made.list() == []
    await made.aclose()
    monkeypatch.setenv("DSH_POSTGRES_DSN", "")
    assert pg.Config().backend().dsn == ""
    assert backend(postgres).dsn == postgres.dsn


def test_an_unreachable_test_server_skips_or_fails_on_demand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        postgres_support, "DSN", f"postgresql://u:{PASSWORD}@127.0.0.1:{closed_port()}/x"
    )
    monkeypatch.delenv("DSH_REQUIRE_POSTGRES", raising=False)
    postgres_support.probe.cache_clear()
    try:
        with pytest.raises(pytest.skip.Exception) as skipped:
            postgres_support.require_postgres()
        assert "does not answer" in str(skipped.value)
        assert PASSWORD not in str(skipped.value)
        monkeypatch.setenv("DSH_REQUIRE_POSTGRES", "1")
        with pytest.raises(pytest.fail.Exception, match="DSH_REQUIRE_POSTGRES=1"):
            postgres_support.require_postgres()
    finally:
        postgres_support.probe.cache_clear()
