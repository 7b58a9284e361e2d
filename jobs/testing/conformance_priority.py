"""Conformance: priorities (issue 30). Among due jobs a higher ``priority`` is claimed first,
FIFO by due time within a priority; a job not yet due waits whatever its priority. A claim
returns its jobs in that order. A job keeps its priority through a retry, a release and an
operator's requeue.

(Expired leases are not ordered by these cases: a driver may re-deliver them ahead of the
pending jobs, as the in-process driver does.)
"""

from __future__ import annotations

from jobs.new_job import NewJob
from jobs.queue import JobQueue

from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, info_of


class PriorityConformance:
    """Higher priority first among due jobs; FIFO by due time within one."""

    async def test_a_job_reports_its_priority_default_zero(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        plain = await enqueue(driver)
        urgent = await enqueue(driver, priority=7)
        assert (await info_of(driver, plain)).priority == 0
        assert (await info_of(driver, urgent)).priority == 7

    async def test_higher_priority_first_fifo_by_due_time_within_one(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        now = driver_harness.clock.now_ms()
        low_oldest = await enqueue(driver, priority=-3, run_at_ms=now - 40)
        plain = await enqueue(driver, run_at_ms=now - 30)
        high_later = await enqueue(driver, priority=5, run_at_ms=now - 10)
        high_earlier = await enqueue(driver, priority=5, run_at_ms=now - 20)
        await enqueue(driver, priority=100, run_at_ms=now + 60_000)  # not due: waits
        first = await driver.claim(3, LEASE_MS, ALL)
        assert [job.id for job in first] == [high_earlier, high_later, plain]
        assert [job.id for job in await driver.claim(5, LEASE_MS, ALL)] == [low_oldest]

    async def test_priority_orders_across_types(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        now = driver_harness.clock.now_ms()
        await enqueue(driver, "a", run_at_ms=now - 50)
        urgent = await enqueue(driver, "b", priority=1, run_at_ms=now - 1)
        assert (await claim_one(driver, ("a", "b"))).id == urgent

    async def test_a_retried_released_or_requeued_job_keeps_its_priority(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, priority=9, max_attempts=1)
        await enqueue(driver)  # priority 0, beside it
        held = await claim_one(driver)
        assert held.id == job_id
        assert await driver.release(job_id, held.lease_token)
        held = await claim_one(driver)
        assert held.id == job_id
        assert await driver.retry(job_id, held.lease_token, delay_ms=0, error="E: again")
        held = await claim_one(driver)
        assert held.id == job_id
        assert await driver.fail(job_id, held.lease_token, error="E: boom")
        assert await driver.requeue(job_id)
        assert (await claim_one(driver)).id == job_id
        assert (await info_of(driver, job_id)).priority == 9

    async def test_the_queue_takes_priority_from_the_request_then_the_definition(
        self, driver_harness: DriverHarness
    ) -> None:
        from pydantic import BaseModel

        from jobs.definitions import define_job

        class Empty(BaseModel):
            pass

        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        urgent = define_job("t", Empty, priority=4)
        by_definition = await queue.enqueue(urgent, {})
        by_request = await queue.enqueue(urgent, {}, priority=-2)
        batch = await queue.enqueue_many(
            [NewJob(type="t", priority=3), NewJob(type=urgent, payload={})]
        )
        priorities = [
            (await info_of(driver, job_id)).priority
            for job_id in (by_definition, by_request, *batch)
            if job_id is not None
        ]
        assert priorities == [4, -2, 3, 4]
