"""A SQLite engine's pool rolls back only connections returned in a transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.util import greenlet_spawn

from orm_sqlalchemy import SQLAlchemyTransactionManager, create_engine


class _Boom(Exception):
    pass


def _count_driver_rollbacks(engine: AsyncEngine) -> list[int]:
    """A count of ``rollback()`` calls on the engine's aiosqlite connections (each one a hop
    to the driver's thread, whether or not a transaction is open)."""
    calls = [0]

    def on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        driver = record.driver_connection
        assert driver is not None
        rollback: Callable[[], Awaitable[None]] = driver.rollback

        async def counted() -> None:
            calls[0] += 1
            await rollback()

        driver.rollback = counted

    event.listen(engine.sync_engine, "connect", on_connect)
    return calls


def _rows_and_lock_free(path: Path) -> tuple[int, bool]:
    """Rows in ``t`` as another connection sees them, and whether it gets the write lock."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        count = int(other.execute("SELECT count(*) FROM t").fetchone()[0])
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return count, False
        other.execute("ROLLBACK")
        return count, True
    finally:
        other.close()


@pytest.fixture
async def engine(tmp_path: Path) -> Any:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'reset.db'}")
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (n INTEGER)"))
    yield engine
    await engine.dispose()


async def test_a_committed_transaction_returns_its_connection_without_a_rollback(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    rollbacks = _count_driver_rollbacks(engine)
    await engine.dispose()  # connections made from here on are counted
    tm = SQLAlchemyTransactionManager(engine)
    for n in range(3):
        async with tm.transaction() as session:
            await session.execute(text("INSERT INTO t VALUES (:n)"), {"n": n})

    assert rollbacks[0] == 0
    assert _rows_and_lock_free(tmp_path / "reset.db") == (3, True)


async def test_an_exception_in_the_transaction_still_rolls_it_back(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    tm = SQLAlchemyTransactionManager(engine)

    async def insert_then_fail() -> None:
        async with tm.transaction() as session:
            await session.execute(text("INSERT INTO t VALUES (1)"))
            raise _Boom

    with pytest.raises(_Boom):
        await insert_then_fail()

    assert _rows_and_lock_free(tmp_path / "reset.db") == (0, True)


async def test_a_connection_given_back_mid_transaction_is_rolled_back_by_the_pool(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    """SQLAlchemy's Connection rolls back what it began itself; this one began on the driver
    (as the stores' statement groups do), so only the pool's reset can end it."""
    rollbacks = _count_driver_rollbacks(engine)
    await engine.dispose()
    raw = await engine.raw_connection()
    driver: Any = raw.driver_connection
    await driver.execute("BEGIN IMMEDIATE")
    await driver.execute("INSERT INTO t VALUES (1)")
    assert _rows_and_lock_free(tmp_path / "reset.db") == (0, False)

    await greenlet_spawn(raw.close)

    assert rollbacks[0] == 1
    assert _rows_and_lock_free(tmp_path / "reset.db") == (0, True)
