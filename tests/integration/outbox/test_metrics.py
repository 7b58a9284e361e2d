"""Outbox metrics on both databases: ``outbox.published`` and the ``outbox.lag`` gauge."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from jobs import InProcessJobDriver, JobOutboxPublisher, JobQueue, ManualClock, OutboxRelay
from orm_sqlalchemy import SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness
from tests.support import attrs, metric_points, wait_until


async def test_the_lag_is_the_age_of_the_oldest_unpublished_entry(
    harness: OutboxHarness,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("jobs.metrics.SAMPLE_INTERVAL_S", 0.0)  # read at every collection
    clock = ManualClock()
    tm = SQLAlchemyTransactionManager(harness.engine())
    outbox = harness.store(tm, clock=clock)
    await harness.setup(outbox)
    entry_type = f"order.{uuid.uuid4().hex[:8]}"
    assert await outbox.oldest_unpublished_age_ms() is None
    async with tm.transaction():
        await outbox.append(entry_type, {"n": 1})
    clock.advance(2_000)
    async with tm.transaction():
        await outbox.append(entry_type, {"n": 2})
    clock.advance(3_000)
    assert await outbox.oldest_unpublished_age_ms() == 5_000

    queue = JobQueue(InProcessJobDriver())
    relay = OutboxRelay(outbox, JobOutboxPublisher(queue), poll_interval_ms=50)
    table = attrs(outbox_table=outbox.table_name)

    def lag() -> int | None:
        return metric_points(metric_reader, "outbox.lag").get(table)

    relay.start()
    try:
        await wait_until(lambda: relay.stats["published"] == 2, message="both published")
        await wait_until(lambda: lag() == 0, message="the lag back to 0")
        published = metric_points(metric_reader, "outbox.published")
        assert published[attrs(outbox_entry_type=entry_type)] == 2
    finally:
        await relay.close()
    assert await outbox.oldest_unpublished_age_ms() is None
    assert lag() is None  # a closed relay's store is no longer read


async def test_the_lag_gauge_reports_a_waiting_entry(
    harness: OutboxHarness,
    metric_reader: InMemoryMetricReader,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("jobs.metrics.SAMPLE_INTERVAL_S", 0.0)
    clock = ManualClock()
    tm = SQLAlchemyTransactionManager(harness.engine())
    outbox = harness.store(tm, clock=clock)
    await harness.setup(outbox)

    class Refusing:
        async def publish(self, entry: object) -> None:
            raise ConnectionError("the queue is down")

    async with tm.transaction():
        await outbox.append("order.waiting", {})
    clock.advance(7_000)
    relay = OutboxRelay(outbox, Refusing(), backoff=lambda attempt: 60_000, poll_interval_ms=50)
    table = attrs(outbox_table=outbox.table_name)
    relay.start()
    try:
        await wait_until(
            lambda: (metric_points(metric_reader, "outbox.lag").get(table) or 0) >= 7_000,
            message="a lag of 7 s",
        )
    finally:
        await relay.close()
