"""``?sslmode=`` in a PostgreSQL URL reaches asyncpg with libpq's meaning (SQLAlchemy's asyncpg
dialect passed it as a keyword asyncpg refuses: a TypeError at connect). The local server has
no TLS: ``disable`` and ``prefer`` connect, ``require`` is refused by the TLS upgrade."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from jobs.errors import StoreUnavailableError
from jobs.testing.chaos import drop_store
from orm_sqlalchemy import SQLAlchemyJobStore, create_engine
from tests.stores import POSTGRES_URL

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("mode", ["disable", "prefer", "allow"])
async def test_a_store_connects_with_sslmode(mode: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}_"
    store = SQLAlchemyJobStore(f"{POSTGRES_URL}?sslmode={mode}", table_prefix=prefix)
    try:
        assert sum((await store.counts()).values()) == 0
    finally:
        await store.close()
        await drop_store(POSTGRES_URL, prefix)


async def test_sslmode_require_is_a_tls_requirement() -> None:
    engine = create_engine(f"{POSTGRES_URL}?sslmode=require")
    try:
        with pytest.raises(ConnectionError, match="rejected SSL upgrade"):
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()
    store = SQLAlchemyJobStore(f"{POSTGRES_URL}?sslmode=require")
    try:
        with pytest.raises(StoreUnavailableError, match="rejected SSL upgrade"):
            await store.counts()
    finally:
        await store.close()


async def test_sslmode_disable_connects_without_tls_and_keeps_the_other_options() -> None:
    engine = create_engine(f"{POSTGRES_URL}?sslmode=disable&prepared_statement_cache_size=0")
    try:
        async with engine.connect() as connection:
            tls = await connection.scalar(
                text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            )
    finally:
        await engine.dispose()
    assert tls is False
    assert engine.url.query == {"prepared_statement_cache_size": "0"}


def test_an_unknown_sslmode_is_refused_before_any_io() -> None:
    with pytest.raises(ValueError, match="sslmode='required' is not one of libpq's"):
        create_engine(f"{POSTGRES_URL}?sslmode=required")
