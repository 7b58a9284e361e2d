"""An outbox entry's job is due when the append said, however late the relay publishes it.

``append(..., delay_ms=...)`` fixes the due time at the append by the database's clock (the
entry stores the absolute time, ``run_at``); ``append(..., run_at=...)`` stores the time given;
``max_attempts`` and ``priority`` are carried to the job. A relay that starts late publishes a
job that is due at that stored time, not a delay after the publish. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from jobs import JobOptionError, JobOutboxPublisher, JobQueue, ManualClock, OutboxRelay
from jobs.clock import to_datetime
from jobs.spi import JobInfo
from orm_sqlalchemy import SQLAlchemyJobStore, SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness
from tests.support import wait_until

LEASE_MS = 30_000


class Shop:
    """An outbox and a job store on one database, both on ``clock`` (None: the database's)."""

    def __init__(self, harness: OutboxHarness, clock: ManualClock | None) -> None:
        self.harness = harness
        self.tm = SQLAlchemyTransactionManager(harness.engine())
        self.outbox = harness.store(self.tm, clock=clock)
        self.jobs = SQLAlchemyJobStore(
            engine=self.tm.engine, table_prefix=harness.prefix, clock=clock
        )
        self.queue = JobQueue(self.jobs)

    async def setup(self) -> None:
        await self.harness.setup(self.outbox)
        await self.jobs.create_schema()

    async def relay_all(self) -> None:
        """A relay that starts now, publishes every committed entry, and closes."""
        relay = OutboxRelay(self.outbox, JobOutboxPublisher(self.queue), poll_interval_ms=20)
        relay.start()

        async def all_published() -> bool:
            return await self.harness.count(where="WHERE published_at IS NULL") == 0

        try:
            await wait_until(all_published, message="every entry published")
        finally:
            await relay.close()

    async def the_job(self) -> JobInfo:
        [job] = (await self.queue.list_jobs(limit=10)).jobs
        return job

    async def close(self) -> None:
        await self.jobs.close()
        if self.harness.postgres:
            async with self.tm.engine.begin() as conn:
                for table in ("queue", "workers"):
                    await conn.execute(text(f'DROP TABLE IF EXISTS "{self.harness.prefix}{table}"'))


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def shop(harness: OutboxHarness, clock: ManualClock) -> AsyncIterator[Shop]:
    app = Shop(harness, clock)
    await app.setup()
    yield app
    await app.close()


async def test_a_delay_counts_from_the_append_not_the_publish(
    shop: Shop, clock: ManualClock
) -> None:
    appended_at = clock.now_ms()
    async with shop.tm.transaction():
        await shop.outbox.append(
            "order.placed", {"id": 7}, delay_ms=3_000, max_attempts=7, priority=4
        )
    clock.advance(5_000)  # the relay is 5 s late: the job is due already
    await shop.relay_all()
    job = await shop.the_job()
    assert job.run_at == to_datetime(appended_at + 3_000)
    assert (job.max_attempts, job.payload, job.priority) == (7, {"id": 7}, 4)
    [claimed] = await shop.jobs.claim(10, LEASE_MS, ["order.placed"])  # due now
    assert (claimed.id, claimed.max_attempts) == (job.id, 7)


async def test_a_delay_still_ahead_when_published_waits_for_its_time(
    shop: Shop, clock: ManualClock
) -> None:
    appended_at = clock.now_ms()
    async with shop.tm.transaction():
        await shop.outbox.append("order.placed", {"id": 8}, delay_ms=10_000)
    clock.advance(4_000)
    await shop.relay_all()
    job = await shop.the_job()
    assert job.run_at == to_datetime(appended_at + 10_000)
    assert (job.max_attempts, job.priority) == (3, 0)  # none given: the queue's defaults
    assert await shop.jobs.claim(10, LEASE_MS, ["order.placed"]) == []
    clock.advance(5_999)
    assert await shop.jobs.claim(10, LEASE_MS, ["order.placed"]) == []
    clock.advance(1)
    assert [job.id for job in await shop.jobs.claim(10, LEASE_MS, ["order.placed"])] == [job.id]


async def test_run_at_is_stored_as_given(shop: Shop, clock: ManualClock) -> None:
    when = datetime(2031, 5, 6, 7, 8, 9, 123_000, tzinfo=UTC)
    async with shop.tm.transaction():
        await shop.outbox.append("order.placed", {"id": 9}, run_at=when)
    clock.advance(60_000)
    await shop.relay_all()
    assert (await shop.the_job()).run_at == when


async def test_no_delay_is_due_when_published(shop: Shop, clock: ManualClock) -> None:
    async with shop.tm.transaction():
        await shop.outbox.append("order.placed", {"id": 10})
    clock.advance(2_000)
    await shop.relay_all()
    assert (await shop.the_job()).run_at == to_datetime(clock.now_ms())


@pytest.mark.parametrize(
    "options",
    [
        {"delay_ms": -1},
        {"delay_ms": 1.5},
        {"run_at": datetime(2031, 1, 1)},  # naive
        {"delay_ms": 5, "run_at": datetime(2031, 1, 1, tzinfo=UTC)},
        {"max_attempts": 0},
        {"max_attempts": True},
    ],
)
async def test_bad_options_are_refused_before_anything_is_written(
    shop: Shop, options: dict[str, object]
) -> None:
    async with shop.tm.transaction():
        with pytest.raises(JobOptionError):
            await shop.outbox.append("order.placed", {"id": 11}, **options)  # type: ignore[arg-type]
    assert await shop.harness.count() == 0


async def test_the_delay_is_fixed_by_the_database_clock_at_the_append(
    harness: OutboxHarness,
) -> None:
    """No injected clock: the append statement's time by the database (PostgreSQL
    clock_timestamp(), SQLite julianday('now')) plus the delay, whatever the relay does."""
    shop = Shop(harness, None)
    await shop.setup()
    try:
        before_ms = time.time_ns() // 1_000_000
        async with shop.tm.transaction():
            await shop.outbox.append("order.placed", {"id": 12}, delay_ms=60_000)
        after_ms = time.time_ns() // 1_000_000
        await asyncio.sleep(1.0)  # the relay starts a second late
        published_from = time.time_ns() // 1_000_000
        await shop.relay_all()
        run_at = (await shop.the_job()).run_at
        slack = timedelta(milliseconds=50)  # the database's clock against this process's
        assert to_datetime(before_ms + 60_000) - slack <= run_at
        assert run_at <= to_datetime(after_ms + 60_000) + slack
        assert run_at < to_datetime(published_from + 60_000) - timedelta(milliseconds=500)
    finally:
        await shop.close()
