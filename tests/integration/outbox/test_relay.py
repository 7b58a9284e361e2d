"""The outbox end to end: transaction -> outbox -> relay -> queue -> runner, on both databases."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobs import (
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    ManualClock,
    OutboxRelay,
)
from jobs.errors import StoreUnavailableError
from jobs.spi import OutboxEntry
from orm_sqlalchemy import SQLAlchemyJobStore, SQLAlchemyOutboxStore, SQLAlchemyTransactionManager
from orm_sqlalchemy import outbox as outbox_module
from orm_sqlalchemy.factory import drop_prefixed_tables
from tests.integration.outbox.conftest import OutboxHarness
from tests.support import captured_logs, wait_until

LEASE_MS = 30_000


class App:
    """An outbox, a relay and a job store sharing one database (the documented wiring)."""

    def __init__(self, harness: OutboxHarness, clock: ManualClock | None = None) -> None:
        self.harness = harness
        self.outbox_clock = clock or ManualClock()
        self.tm = SQLAlchemyTransactionManager(harness.engine())
        self.outbox: SQLAlchemyOutboxStore = harness.store(self.tm, clock=clock)
        self.jobs = SQLAlchemyJobStore(engine=self.tm.engine, table_prefix=harness.prefix)
        self.queue = JobQueue(self.jobs)

    async def setup(self) -> None:
        await self.harness.setup(self.outbox)
        await self.jobs.create_schema()

    async def place_order(self, note: str, *, fail: bool = False) -> None:
        async with self.tm.transaction() as session:
            await session.execute(self.harness.orders.insert().values(note=note))
            await self.outbox.append("order.placed", {"note": note})
            if fail:
                raise RuntimeError(f"order {note} rolled back")

    async def job_count(self) -> int:
        counts = await self.jobs.counts()
        return sum(counts.values())

    async def close(self) -> None:
        await self.jobs.close()
        if self.harness.postgres:
            async with self.tm.engine.begin() as conn:
                await drop_prefixed_tables(conn, self.harness.prefix)


@pytest.fixture
async def app(harness: OutboxHarness) -> AsyncIterator[App]:
    application = App(harness, ManualClock())
    await application.setup()
    yield application
    await application.close()


async def test_a_commit_publishes_exactly_one_job_and_a_rollback_none(app: App) -> None:
    relay = OutboxRelay(app.outbox, JobOutboxPublisher(app.queue), poll_interval_ms=50)
    await app.place_order("kept")
    with pytest.raises(RuntimeError):
        await app.place_order("dropped", fail=True)
    relay.start()
    try:
        await wait_until(lambda: relay.stats["published"] == 1, message="one entry published")
        assert await app.job_count() == 1
        (job,) = await app.jobs.claim(10, LEASE_MS, ["order.placed"])
        assert job.payload == '{"note":"kept"}'
        assert job.key is not None
        assert job.key.startswith("outbox:")
        assert await app.harness.order_count() == 1
    finally:
        await relay.close()


async def test_a_relay_that_dies_between_publish_and_mark_publishes_again_and_the_job_runs_once(
    app: App,
) -> None:
    await app.place_order("only")
    published: list[str] = []
    crash = asyncio.Event()

    class CrashesAfterPublishing:
        async def publish(self, entry: OutboxEntry) -> None:
            await JobOutboxPublisher(app.queue).publish(entry)
            published.append(entry.id)
            crash.set()
            await asyncio.Event().wait()  # the process dies here, before marking

    doomed = OutboxRelay(app.outbox, CrashesAfterPublishing(), lease_ms=LEASE_MS)
    dying = asyncio.create_task(doomed.relay_once())
    await asyncio.wait_for(crash.wait(), 10)
    dying.cancel()
    await asyncio.gather(dying, return_exceptions=True)

    app.outbox_clock.advance(LEASE_MS)
    survivor = OutboxRelay(app.outbox, JobOutboxPublisher(app.queue), lease_ms=LEASE_MS)
    assert await survivor.relay_once() == 1  # the entry came back after the lease
    assert survivor.stats["published"] == 1
    assert await app.job_count() == 1  # the second hand-over was dropped by the key

    ran: list[Any] = []
    registry = JobHandlerRegistry()

    async def send_email(payload: Any) -> None:
        ran.append(payload)

    registry.register("order.placed", send_email)
    runner = JobRunner(app.jobs, registry)
    runner.start()
    await wait_until(lambda: runner.stats["completed"] == 1)
    await runner.close()
    assert ran == [{"note": "only"}]


async def test_without_the_key_the_duplicate_hand_over_is_visible(app: App) -> None:
    """The control for the test above: it can see a duplicate when dedupe is off."""
    await app.place_order("only")

    class NoKeyPublisher:
        async def publish(self, entry: OutboxEntry) -> None:
            await app.queue.enqueue(entry.type, entry.payload)

    first = await app.outbox.claim(10, LEASE_MS)
    await NoKeyPublisher().publish(first[0])
    app.outbox_clock.advance(LEASE_MS)
    assert await OutboxRelay(app.outbox, NoKeyPublisher()).relay_once() == 1
    assert await app.job_count() == 2


async def test_a_failed_publish_is_retried_after_a_backoff(app: App) -> None:
    await app.place_order("retry-me")
    attempts = 0

    class Flaky:
        async def publish(self, entry: OutboxEntry) -> None:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise ConnectionError("queue unreachable")
            await JobOutboxPublisher(app.queue).publish(entry)

    relay = OutboxRelay(app.outbox, Flaky(), backoff=lambda attempt: 5_000)
    with captured_logs("WARNING") as logs:
        assert await relay.relay_once() == 1
    # (Behind PgBouncer the store also says once that its wake-up polls.)
    (warning,) = [log for log in logs if log["message"].startswith("publishing")]
    assert warning["message"].startswith(
        "publishing outbox entries failed: ConnectionError: queue unreachable; entry "
    )
    assert warning["message"].endswith("(order.placed) is retried in 5000 ms")
    assert relay.stats == {"published": 0, "failed": 1, "pruned": 0}
    assert await relay.relay_once() == 0  # not before its backoff
    app.outbox_clock.advance(5_000)
    assert await relay.relay_once() == 1
    assert relay.stats == {"published": 1, "failed": 1, "pruned": 0}
    assert await app.job_count() == 1


async def test_a_failing_store_is_explained_once_and_its_recovery_said(app: App) -> None:
    class DownTwice:
        """The app's outbox store, whose first two claims fail as an outage would."""

        failures = 2

        def __getattr__(self, name: str) -> Any:
            return getattr(app.outbox, name)

        async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
            if self.failures:
                self.failures -= 1
                raise StoreUnavailableError("the database is down")
            return await app.outbox.claim(limit, lease_ms)

    await app.place_order("after the outage")
    relay = OutboxRelay(
        DownTwice(), JobOutboxPublisher(app.queue), backoff=lambda n: 10 * n, poll_interval_ms=50
    )
    with captured_logs("INFO") as logs:
        relay.start()
        await wait_until(lambda: relay.stats["published"] == 1, message="published after it")
        await relay.close()
    # (Behind PgBouncer the store also says once that its wake-up polls: not the relay's.)
    said = [
        (log["level"], log["message"]) for log in logs if "pooler" not in log["message"]
    ]
    assert said[0][0] == "ERROR"  # the first claim is the start's check of the store
    assert said[0][1].startswith("outbox relay: its store ")
    assert said[0][1].endswith(" cannot be reached: StoreUnavailableError: the database is down")
    said = said[1:]
    assert said[:2] == [
        (
            "ERROR",
            "relaying outbox entries failed: StoreUnavailableError: the database is down; "
            "retrying in 10 ms",
        ),
        (
            "ERROR",
            "relaying outbox entries failed (2 in a row): StoreUnavailableError: the "
            "database is down; retrying in 20 ms",
        ),
    ]
    assert said[2][0] == "INFO"
    assert said[2][1].startswith("relaying outbox entries works again after 2 failures (")


@pytest.mark.postgres
async def test_two_relays_publish_each_of_1000_entries_once(
    postgres_harness: OutboxHarness,
) -> None:
    app = App(postgres_harness)
    await app.setup()
    try:
        for batch in range(10):
            async with app.tm.transaction():
                for n in range(100):
                    await app.outbox.append("order.placed", {"n": batch * 100 + n})
        seen: Counter[str] = Counter()

        class Counting:
            async def publish(self, entry: OutboxEntry) -> None:
                seen[entry.id] += 1
                await JobOutboxPublisher(app.queue).publish(entry)

        second_store = postgres_harness.store(
            SQLAlchemyTransactionManager(postgres_harness.engine())
        )
        relays = [
            OutboxRelay(app.outbox, Counting(), batch_size=50, poll_interval_ms=50),
            OutboxRelay(second_store, Counting(), batch_size=50, poll_interval_ms=50),
        ]
        for relay in relays:
            relay.start()
        await wait_until(lambda: sum(seen.values()) >= 1_000, timeout=60, message="1000 entries")
        for relay in relays:
            await relay.close()
        assert len(seen) == 1_000
        assert set(seen.values()) == {1}
        assert all(relay.stats["published"] > 0 for relay in relays)
        assert await app.job_count() == 1_000
    finally:
        await app.close()


async def test_the_relay_is_caught_up_once_a_claim_finds_nothing_and_not_while_entries_wait(
    app: App,
) -> None:
    relay = OutboxRelay(app.outbox, JobOutboxPublisher(app.queue), batch_size=2)
    assert not relay.caught_up
    for note in ("a", "b", "c"):
        await app.place_order(note)
    assert await relay.relay_once() == 2
    assert not relay.caught_up
    assert await relay.relay_once() == 1
    assert not relay.caught_up
    assert await relay.relay_once() == 0
    assert relay.caught_up
    await app.place_order("d")
    assert await relay.relay_once() == 1
    assert not relay.caught_up
    await relay.close()


async def test_the_relay_prunes_entries_published_past_their_retention_batch_after_batch(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries published longer ago than retain_published_ms go, a bounded batch a statement
    until none is left; those published since stay."""
    monkeypatch.setattr(outbox_module, "PRUNE_BATCH", 2)
    relay = OutboxRelay(
        app.outbox,
        JobOutboxPublisher(app.queue),
        poll_interval_ms=50,
        retain_published_ms=1_000,
        prune_interval_ms=50,
    )
    for n in range(5):
        await app.place_order(f"old-{n}")
    relay.start()
    try:
        await wait_until(lambda: relay.stats["published"] == 5, message="five published")
        assert relay.stats["pruned"] == 0  # published just now: kept
        app.outbox_clock.advance(600)
        await app.place_order("new")
        await wait_until(lambda: relay.stats["published"] == 6, message="the sixth published")
        app.outbox_clock.advance(600)  # the five: 1.2 s ago, past 1 s; the sixth: 0.6 s
        await wait_until(lambda: relay.stats["pruned"] == 5, message="the five pruned")
        assert await app.harness.count() == 1
        assert await app.job_count() == 6  # the jobs themselves are the job store's
        assert relay.health().healthy
    finally:
        await relay.close()
