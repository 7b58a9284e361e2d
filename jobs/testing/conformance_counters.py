"""The conformance cases of the outcome counters (``jobs.spi.OutcomeCounters``): batches add up
by minute, type and outcome, bucket by bucket; reads filter by minute and type; rows older than
``COUNTERS_KEEP_MS`` go; purging jobs leaves them; a runner's executions reach them, counted by
the minutes of the driver's clock (``ClockedDriver``)."""

from __future__ import annotations

from jobs.counters import MINUTE_MS, flush, summarize
from jobs.handlers import JobHandlerRegistry
from jobs.queue import JobQueue
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import (
    COUNTERS_KEEP_MS,
    DURATION_BOUNDS_MS,
    ClockedDriver,
    OutcomeCount,
    OutcomeCounters,
)
from jobs.spi.support import ManualClock

from .helpers import LEASE_MS, DriverHarness, wait_until

BUCKETS = len(DURATION_BOUNDS_MS) + 1


def _row(minute: int, job_type: str, outcome: str, count: int, bucket: int) -> OutcomeCount:
    buckets = [0] * BUCKETS
    buckets[bucket] = count
    return OutcomeCount(
        minute_ms=minute, type=job_type, outcome=outcome, count=count,
        duration_ms=count * 40, buckets=tuple(buckets),
    )  # fmt: skip


def _minute(clock: ManualClock, back: int = 0) -> int:
    now = clock.now_ms()
    return now - now % MINUTE_MS - back * MINUTE_MS


class CountersConformance:
    async def test_counts_add_up_by_minute_type_and_outcome(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, OutcomeCounters)
        clock = driver_harness.clock
        now, before = _minute(clock), _minute(clock, 1)
        await driver.add_counts([_row(now, "email.send", "completed", 3, 1)])
        await driver.add_counts([
            _row(now, "email.send", "completed", 2, 4),
            _row(now, "email.send", "failed", 1, 9),
            _row(before, "report.build", "retried", 5, 0),
        ])  # fmt: skip
        rows = await driver.read_counts(before)
        assert [(r.minute_ms, r.type, r.outcome, r.count, r.duration_ms) for r in rows] == [
            (before, "report.build", "retried", 5, 200),
            (now, "email.send", "completed", 5, 200),
            (now, "email.send", "failed", 1, 40),
        ]
        completed = rows[1].buckets
        assert (completed[1], completed[4], sum(completed)) == (3, 2, 5)
        assert [r.type for r in await driver.read_counts(now)] == ["email.send", "email.send"]
        only = await driver.read_counts(before, "report.build")
        assert [(r.type, r.count) for r in only] == [("report.build", 5)]

    async def test_counts_older_than_the_keep_go(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, OutcomeCounters)
        clock = driver_harness.clock
        old = _minute(clock)
        await driver.add_counts([_row(old, "t", "completed", 1, 0)])
        clock.advance(COUNTERS_KEEP_MS + 2 * MINUTE_MS)
        await driver.add_counts([_row(_minute(clock), "t", "completed", 1, 0)])
        rows = await driver.read_counts(old)
        assert [r.minute_ms for r in rows] == [_minute(clock)]

    async def test_a_runners_executions_are_counted_and_survive_a_purge(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, OutcomeCounters)
        registry = JobHandlerRegistry()

        async def works(payload: object) -> None:
            return None

        async def breaks(payload: object) -> None:
            raise RuntimeError("no")

        registry.register("c.ok", works)
        registry.register("c.bad", breaks, max_attempts=2, backoff=lambda attempt: 0)
        runner = JobRunner(driver, registry, JobsSettings(lease_ms=LEASE_MS, poll_interval_ms=50))
        queue = JobQueue(driver)
        for n in range(3):
            await queue.enqueue("c.ok", {"n": n})
        await queue.enqueue("c.bad", {})
        runner.start()
        try:

            async def settled() -> bool:
                stats = await queue.stats()
                return stats["c.ok"].completed == 3 and stats["c.bad"].failed == 1

            await wait_until(settled, timeout=10.0, message="the runner to settle every job")
        finally:
            await runner.close()  # flushes what it counted
        await queue.purge(("completed", "failed"))
        history = {row.type: row for row in summarize(await driver.read_counts(0))}
        assert (history["c.ok"].completed, history["c.ok"].failed) == (3, 0)
        assert (history["c.bad"].retried, history["c.bad"].failed) == (1, 1)
        assert history["c.ok"].p50_ms is not None
        await flush(runner.tally, driver)  # nothing left to write

    async def test_a_runner_counts_by_the_minutes_of_the_drivers_clock(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, OutcomeCounters)
        assert isinstance(driver, ClockedDriver)
        assert driver.clock is driver_harness.clock
        clock = driver_harness.clock
        clock.advance(3 * 60 * MINUTE_MS)  # hours away from this host's clock
        registry = JobHandlerRegistry()

        async def works(payload: object) -> None:
            return None

        registry.register("c.clocked", works)
        queue = JobQueue(driver)
        await queue.enqueue("c.clocked", {})
        runner = JobRunner(driver, registry, JobsSettings(lease_ms=LEASE_MS, poll_interval_ms=50))
        runner.start()
        try:

            async def completed() -> bool:
                stats = await queue.stats()
                return stats["c.clocked"].completed == 1

            await wait_until(completed, timeout=10.0, message="the runner to complete the job")
        finally:
            await runner.close()  # flushes what it counted
        rows = [row for row in await driver.read_counts(0) if row.type == "c.clocked"]
        assert [(row.minute_ms, row.outcome) for row in rows] == [(_minute(clock), "completed")]
