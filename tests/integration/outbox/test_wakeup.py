"""wait_for_entries: woken by a commit that appended, not by rollbacks or an idle store."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text

from jobs.clock import ManualClock
from orm_sqlalchemy.outbox import SQLAlchemyOutboxStore
from orm_sqlalchemy.tables import notify_channel
from orm_sqlalchemy.transactions import SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness

WAIT_MS = 30_000
DEADLINE_S = 5.0


async def _store(
    harness: OutboxHarness,
) -> tuple[SQLAlchemyTransactionManager, SQLAlchemyOutboxStore]:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm)
    await harness.setup(store)
    return tm, store


async def _waiting(store: SQLAlchemyOutboxStore) -> asyncio.Task[None]:
    """A waiter that is parked in wait_for_entries before the caller goes on."""
    waiter = asyncio.create_task(store.wait_for_entries(WAIT_MS))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not waiter.done()
    return waiter


async def test_a_commit_that_appended_wakes_the_waiter(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    await store.claim(1, 1_000)  # as a relay does before it waits
    waiter = await _waiting(store)
    started = time.monotonic()
    async with tm.transaction():
        await store.append("order.placed", {"id": 1})
        await asyncio.sleep(0)
        assert not waiter.done()  # not before the commit
    async with asyncio.timeout(DEADLINE_S):
        await waiter
    assert time.monotonic() - started < DEADLINE_S


async def test_a_commit_before_the_wait_is_not_lost(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    async with tm.transaction():
        await store.append("order.placed", {"id": 1})
    async with asyncio.timeout(DEADLINE_S):
        await store.wait_for_entries(WAIT_MS)


async def test_rollback_and_an_idle_store_do_not_wake_the_waiter(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    await store.claim(1, 1_000)

    async def rolled_back() -> None:
        async with tm.transaction():
            await store.append("order.placed", {"id": 1})
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        await rolled_back()
    started = time.monotonic()
    await store.wait_for_entries(300)
    # An idle store waits the whole timeout: a relay must not spin.
    assert time.monotonic() - started >= 0.29


async def test_moving_a_manual_clock_wakes_the_waiter(harness: OutboxHarness) -> None:
    clock = ManualClock(1_000_000)
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm, clock=clock)
    await harness.setup(store)
    waiter = await _waiting(store)
    clock.advance(1_000)
    async with asyncio.timeout(DEADLINE_S):
        await waiter


@pytest.mark.postgres
async def test_notify_wakes_a_store_on_another_engine(postgres_harness: OutboxHarness) -> None:
    tm, writer = await _store(postgres_harness)
    relay_side = postgres_harness.store()  # its own engine and manager: "another process"
    assert await relay_side.claim(10, 1_000) == []  # starts LISTEN, as a relay's first claim
    waiter = await _waiting(relay_side)
    async with tm.transaction():
        await writer.append("order.placed", {"id": 1})
        # pg_notify inside the transaction is delivered only on commit.
        await asyncio.sleep(0.05)
        assert not waiter.done()
    async with asyncio.timeout(DEADLINE_S):
        await waiter
    [entry] = await relay_side.claim(10, 1_000)
    assert entry.payload == {"id": 1}


async def test_a_sqlite_store_wakes_on_a_commit_through_another_engine(
    harness: OutboxHarness,
) -> None:
    """SQLite has no LISTEN: a store sees other connections' commits by the file's
    data_version, as a relay in a worker process does when the app's process appends."""
    if harness.postgres:
        pytest.skip("PostgreSQL wakes other engines by NOTIFY (the test above)")
    tm, writer = await _store(harness)
    relay_side = harness.store()  # its own engine and manager: "another process"
    assert await relay_side.claim(10, 1_000) == []
    waiter = await _waiting(relay_side)
    await asyncio.sleep(0.2)
    assert not waiter.done()  # an idle file does not wake it
    async with tm.transaction():
        await writer.append("order.placed", {"id": 1})
    async with asyncio.timeout(DEADLINE_S):  # well inside WAIT_MS
        await waiter
    [entry] = await relay_side.claim(10, 1_000)
    assert entry.payload == {"id": 1}


@pytest.mark.postgres
async def test_an_idle_listening_store_waits_the_whole_timeout(
    postgres_harness: OutboxHarness,
) -> None:
    _, store = await _store(postgres_harness)
    await store.claim(1, 1_000)
    started = time.monotonic()
    await store.wait_for_entries(300)
    await store.wait_for_entries(300)
    assert time.monotonic() - started >= 0.59


@pytest.mark.postgres
async def test_a_lost_listen_connection_wakes_once_and_reconnects(
    postgres_harness: OutboxHarness,
) -> None:
    tm, writer = await _store(postgres_harness)
    relay_side = postgres_harness.store()
    await relay_side.claim(1, 1_000)
    channel = notify_channel("outbox", relay_side.table_name)
    async with tm.engine.begin() as conn:
        killed = await conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query = :listen AND pid <> pg_backend_pid()"
            ),
            {"listen": f'LISTEN "{channel}"'},
        )
        assert killed.scalars().all() == [True]
    # The loss wakes the waiter (a commit may have gone unheard), then it reconnects.
    async with asyncio.timeout(DEADLINE_S):
        await relay_side.wait_for_entries(WAIT_MS)
    await relay_side.claim(1, 1_000)
    waiter = await _waiting(relay_side)
    async with tm.transaction():
        await writer.append("order.placed", {"id": 1})
    async with asyncio.timeout(DEADLINE_S):
        await waiter
