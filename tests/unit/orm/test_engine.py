"""SQLite engine set-up: WAL, busy timeout, BEGIN IMMEDIATE; PostgreSQL URLs left alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from jobs.spi import JOB_STATES
from orm_sqlalchemy import SQLAlchemyJobStore
from orm_sqlalchemy.engine import (
    BUSY_TIMEOUT_MS,
    POSTGRES_POOL_SIZE,
    _prepare_connection,
    configure_sqlite,
    create_engine,
    is_sqlite,
    normalize_url,
)
from tests.stores import POSTGRES_URL


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def _pragmas(engine: AsyncEngine) -> tuple[str, int, int]:
    async with engine.connect() as conn:
        mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar_one()
        busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar_one()
        keys = (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar_one()
    return str(mode), int(busy), int(keys)


async def test_sqlite_engine_uses_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    engine = create_engine(_url(tmp_path / "a.db"))
    try:
        assert is_sqlite(engine)
        assert await _pragmas(engine) == ("wal", BUSY_TIMEOUT_MS, 1)
    finally:
        await engine.dispose()


async def test_plain_sqlite_url_gets_the_async_driver(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert engine.dialect.driver == "aiosqlite"
    finally:
        await engine.dispose()


async def test_postgres_url_is_left_alone() -> None:
    engine = create_engine("postgresql://postgres@127.0.0.1:5432/test")
    try:
        assert engine.dialect.driver == "asyncpg"
        assert not is_sqlite(engine)
        configure_sqlite(engine)  # a no-op on PostgreSQL
        assert not engine.sync_engine.dispatch.begin
    finally:
        await engine.dispose()


async def test_postgres_engine_pool_has_room_for_the_stores_and_the_app() -> None:
    engine = create_engine("postgresql://postgres@127.0.0.1:5432/test")
    own = create_engine("postgresql://postgres@127.0.0.1:5432/test", pool_size=3)
    try:
        assert engine.pool.size() == POSTGRES_POOL_SIZE  # type: ignore[attr-defined]
        assert own.pool.size() == 3  # type: ignore[attr-defined]
    finally:
        await engine.dispose()
        await own.dispose()


async def test_transactions_begin_immediate(tmp_path: Path) -> None:
    """A transaction that has only read holds the write lock: it began IMMEDIATE."""
    path = tmp_path / "c.db"
    engine = create_engine(_url(path))
    try:
        async with engine.begin() as conn:
            await conn.execute(text("SELECT 1"))
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
            finally:
                other.close()
    finally:
        await engine.dispose()


async def test_borrowed_engine_is_configured_including_pooled_connections(
    tmp_path: Path,
) -> None:
    engine = create_async_engine(_url(tmp_path / "d.db"))
    try:
        async with engine.connect() as conn:  # a connection now sits in the pool, unconfigured
            await conn.execute(text("SELECT 1"))
        configure_sqlite(engine)
        configure_sqlite(engine)  # idempotent
        assert await _pragmas(engine) == ("wal", BUSY_TIMEOUT_MS, 1)
    finally:
        await engine.dispose()


async def _read_then_write(engine: AsyncEngine, rounds: int, begin: str = "IMMEDIATE") -> None:
    for _ in range(rounds):
        async with engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin=begin)
            async with conn.begin():
                count = (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one()
                await conn.execute(text("INSERT INTO t (n) VALUES (:n)"), {"n": count})


async def test_two_engines_writing_concurrently_are_never_locked_out(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    first, second = create_engine(_url(path)), create_engine(_url(path))
    try:
        async with first.begin() as conn:
            await conn.execute(text("CREATE TABLE t (n INTEGER NOT NULL)"))
        await asyncio.gather(
            *(_read_then_write(engine, 25) for engine in (first, second) for _ in range(4))
        )
        async with second.connect() as conn:
            rows = (await conn.execute(text("SELECT n FROM t ORDER BY n"))).scalars().all()
        # Serialised writers: every transaction saw all the earlier ones.
        assert rows == list(range(200))
    finally:
        await first.dispose()
        await second.dispose()


async def test_control_a_deferred_begin_that_upgrades_is_locked_out(tmp_path: Path) -> None:
    """Shows the failure the IMMEDIATE default prevents, so the test above can see it."""
    path = tmp_path / "f.db"
    first, second = create_engine(_url(path)), create_engine(_url(path))
    barrier = asyncio.Barrier(2)

    async def deferred(engine: AsyncEngine) -> None:
        async with engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="DEFERRED")
            async with conn.begin():
                await conn.execute(text("SELECT count(*) FROM t"))
                await barrier.wait()
                await conn.execute(text("INSERT INTO t (n) VALUES (1)"))

    try:
        async with first.begin() as conn:
            await conn.execute(text("CREATE TABLE t (n INTEGER NOT NULL)"))
        results = await asyncio.wait_for(
            asyncio.gather(deferred(first), deferred(second), return_exceptions=True),
            timeout=4 * BUSY_TIMEOUT_MS / 1000,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1
        assert isinstance(errors[0], OperationalError)
        assert "database is locked" in str(errors[0])
    finally:
        await first.dispose()
        await second.dispose()


async def test_unknown_begin_mode_is_rejected(tmp_path: Path) -> None:
    engine = create_engine(_url(tmp_path / "g.db"))
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="SOMETIMES")
            with pytest.raises(ValueError, match="sqlite_begin"):
                await conn.begin()
    finally:
        await engine.dispose()


def test_connections_opening_a_new_file_at_once_all_switch_it_to_wal(tmp_path: Path) -> None:
    """Switching a brand-new file to WAL from two connections at once fails one of them with
    "database is locked" at once (the busy timeout does not apply); set-up must retry."""
    errors: list[BaseException] = []
    for trial in range(100):
        path = tmp_path / f"fresh-{trial}.db"
        barrier = threading.Barrier(8)

        def open_and_prepare(path: Path = path, barrier: threading.Barrier = barrier) -> None:
            connection = sqlite3.connect(path, check_same_thread=False)
            try:
                barrier.wait()
                _prepare_connection(connection, BUSY_TIMEOUT_MS)
                mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
                assert mode == "wal"
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=open_and_prepare) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:pw@db.example:5432/app", "postgresql+asyncpg://u:***@db.example:5432/app"),
        ("postgresql://u@db.example/app", "postgresql+asyncpg://u@db.example/app"),
        ("postgresql+asyncpg://u@db.example/app", "postgresql+asyncpg://u@db.example/app"),
        ("sqlite:///jobs.db", "sqlite+aiosqlite:///jobs.db"),
        ("sqlite+aiosqlite:///jobs.db", "sqlite+aiosqlite:///jobs.db"),
    ],
)
def test_urls_are_normalised_to_the_async_drivers(given: str, expected: str) -> None:
    assert normalize_url(given).render_as_string(hide_password=True) == expected


@pytest.mark.postgres
async def test_a_heroku_style_postgres_url_reaches_the_database() -> None:
    url = POSTGRES_URL.replace("postgresql+asyncpg://", "postgres://")
    assert url.startswith("postgres://")
    store = SQLAlchemyJobStore(url=url, table_prefix=f"u{uuid.uuid4().hex[:8]}_")
    try:
        assert await store.counts() == dict.fromkeys(JOB_STATES, 0)
    finally:
        async with store.engine.begin() as conn:
            for table in store.metadata.sorted_tables:
                await conn.execute(text(f'DROP TABLE IF EXISTS "{table.name}"'))
        await store.close()


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "postgresql+psycopg2://u:pw@h/db", "redis://127.0.0.1:6379/0"]
)
def test_an_unknown_scheme_names_the_accepted_ones_without_the_password(url: str) -> None:
    with pytest.raises(ValueError, match=r"accepted schemes: sqlite://.*postgres://") as info:
        create_engine(url)
    assert "pw" not in str(info.value)
    with pytest.raises(ValueError, match="unsupported database URL scheme"):
        SQLAlchemyJobStore(url=url)
