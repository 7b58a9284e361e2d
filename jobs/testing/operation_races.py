"""The operations SPI's races and bad input, part of ``OperationsConformance``: each race
leaves the job in one state and tells the loser (False, or not counted)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from jobs.queue import JobQueue

from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, failed_job, info_of


class OperationRaceCases:
    # -- races: one state, the loser told ---------------------------------------------------------

    async def test_an_operator_retry_racing_a_claim_has_one_outcome(
        self, driver_harness: DriverHarness
    ) -> None:
        """The claim fails an expired job past its stalls while an operator retries it."""
        first, second = await driver_harness.driver(), await driver_harness.driver()
        for _ in range(10):
            job_id = await enqueue(first, max_attempts=1, max_stalls=0)
            await claim_one(first)
            driver_harness.clock.advance(LEASE_MS)
            requeued, claimed = await asyncio.gather(
                first.requeue(job_id), second.claim(1, LEASE_MS, ALL)
            )
            assert claimed == []
            info = await info_of(first, job_id)
            if requeued:
                assert (info.state, info.max_attempts) == ("pending", 2)
            else:
                assert info.state == "failed"
                assert await first.requeue(job_id)
            assert await first.cancel(job_id)

    async def test_a_cancel_racing_a_complete_has_one_winner(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        outcomes = set()
        for _ in range(20):
            job_id = await enqueue(first)
            job = await claim_one(first)
            cancelled, completed = await asyncio.gather(
                second.cancel(job_id), first.complete(job_id, job.lease_token)
            )
            assert cancelled != completed
            state = (await info_of(first, job_id)).state
            assert state == ("cancelled" if cancelled else "completed")
            outcomes.add(state)
        assert outcomes

    async def test_a_cancel_racing_a_claim_leaves_the_job_cancelled(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        for _ in range(10):
            job_id = await enqueue(first)
            cancelled, claimed = await asyncio.gather(
                first.cancel(job_id), second.claim(1, LEASE_MS, ALL)
            )
            assert cancelled
            assert (await info_of(first, job_id)).state == "cancelled"
            for job in claimed:
                assert await second.complete(job.id, job.lease_token) is False
            assert (await info_of(first, job_id)).state == "cancelled"

    async def test_a_purge_racing_a_retry_has_one_winner(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        for _ in range(10):
            job_id = await failed_job(first)
            purged, requeued = await asyncio.gather(first.purge(["failed"]), second.requeue(job_id))
            info = await first.get_job(job_id)
            if requeued:
                assert (purged, info is not None and info.state) == (0, "pending")
                assert await first.cancel(job_id)
            else:
                assert (purged, info) == (1, None)

    async def test_two_operator_retries_give_one_attempt(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        job_id = await failed_job(first)
        results = await asyncio.gather(first.requeue(job_id), second.requeue(job_id))
        assert sorted(results) == [False, True]
        assert (await info_of(first, job_id)).max_attempts == 2

    # -- bad input, through the queue ------------------------------------------------------------

    async def test_unknown_ids_are_none_or_false(self, driver_harness: DriverHarness) -> None:
        queue = JobQueue(await driver_harness.driver())
        unknown = uuid.uuid4().hex
        assert await queue.get_job(unknown) is None
        assert await queue.find_job(key="nobody") is None
        assert await queue.retry(unknown) is False
        assert await queue.cancel(unknown) is False
        assert await queue.retry_failed(type="nothing.here") == 0
        assert await queue.purge(("failed",), type="nothing.here") == 0

    async def test_bad_arguments_name_themselves_and_write_nothing(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        failed = await failed_job(driver)
        before = await driver.counts()
        cases: list[tuple[str, object]] = [
            ("'bogus'", queue.list_jobs(state="bogus")),
            ("job type", queue.list_jobs(type="")),
            ("limit", queue.list_jobs(limit=0)),
            ("cursor", queue.list_jobs(cursor="not a cursor")),
            ("'done'", queue.purge(states=("failed", "done"))),
            ("active", queue.purge(states=("completed", "active"))),
            ("states", queue.purge(states="failed")),
            ("older_than_ms", queue.purge(states=("failed",), older_than_ms=-1)),
            ("job type", queue.retry_failed(type="")),
            ("key", queue.find_job(key="")),
        ]
        for needle, call in cases:
            with pytest.raises(ValueError, match=needle):
                await call  # type: ignore[misc]
        assert await driver.counts() == before
        assert (await info_of(driver, failed)).state == "failed"
