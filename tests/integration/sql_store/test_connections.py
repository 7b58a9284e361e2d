"""PostgreSQL statements on the engine's pool: back-to-back statements share one checkout, and
a connection left unused goes back to the pool."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from orm_sqlalchemy._database.connections import PostgresBackend
from orm_sqlalchemy._database.statements import Statement
from orm_sqlalchemy.engine import create_engine

from .support import StoreHarness

pytestmark = pytest.mark.postgres

ONE = Statement("one", "SELECT 1 AS one", ())


@pytest.fixture
async def engine(pg_harness: StoreHarness) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(pg_harness.url)
    yield engine
    await engine.dispose()


def count_checkouts(engine: AsyncEngine) -> list[int]:
    checkouts = [0]

    def on_checkout(*_: Any) -> None:
        checkouts[0] += 1

    event.listen(engine.sync_engine, "checkout", on_checkout)
    return checkouts


async def until_all_checked_in(engine: AsyncEngine) -> None:
    deadline = time.monotonic() + 5
    while engine.pool.checkedout() != 0:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "a connection stayed checked out of the pool"
        await asyncio.sleep(0.005)


async def test_statements_in_a_row_check_out_one_connection(engine: AsyncEngine) -> None:
    backend = PostgresBackend(engine, size=4, name="test")
    checkouts = count_checkouts(engine)
    try:
        for _ in range(20):
            assert [row["one"] for row in await backend.fetch(ONE, {})] == [1]
        assert checkouts[0] == 1
    finally:
        await backend.close()


async def test_an_unused_connection_goes_back_to_the_pool_and_is_checked_out_again(
    engine: AsyncEngine,
) -> None:
    backend = PostgresBackend(engine, size=4, name="test")
    checkouts = count_checkouts(engine)
    try:
        await asyncio.gather(*(backend.fetch(ONE, {}) for _ in range(3)))
        await until_all_checked_in(engine)
        before = checkouts[0]
        await backend.fetch(ONE, {})
        assert checkouts[0] == before + 1
    finally:
        await backend.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_close_checks_in_the_kept_connection_at_once(engine: AsyncEngine) -> None:
    backend = PostgresBackend(engine, size=4, name="test")
    await backend.fetch(ONE, {})
    assert engine.pool.checkedout() == 1  # type: ignore[attr-defined]
    await backend.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
