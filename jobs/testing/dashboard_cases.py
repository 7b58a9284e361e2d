"""Conformance cases of what the dashboard needs beyond the operations issue (issue 12).

``delete``, an operator removing one job, and the trace context in ``JobInfo`` (the dashboard's
job page shows the trace id). Part of ``DriverConformance``; the case names are in
``OPERATIONS_CASES`` with the rest of the operations SPI, so a driver that skips those skips
these too until it implements them.
"""

from __future__ import annotations

import asyncio
import uuid

from jobs.spi import JOB_STATES

from .helpers import LEASE_MS, DriverHarness, claim_one, enqueue
from .requests import new_request


class DashboardConformance:
    async def test_job_info_keeps_the_trace_context_of_the_enqueue(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        traced = await enqueue(driver, trace_context=traceparent)
        plain = await enqueue(driver)
        for job_id, expected in ((traced, traceparent), (plain, None)):
            info = await driver.get_job(job_id)
            assert info is not None
            assert info.trace_context == expected
            listed = {job.id: job for job in (await driver.list_jobs(limit=10)).jobs}
            assert listed[job_id] == info

    async def test_delete_removes_a_job_in_any_state_but_active_and_frees_its_key(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        done = await enqueue(driver, key="k:completed")
        job = await claim_one(driver)
        assert await driver.complete(done, job.lease_token)
        failed = await enqueue(driver, key="k:failed", max_attempts=1)
        job = await claim_one(driver)
        assert await driver.fail(failed, job.lease_token, error="RuntimeError: boom")
        cancelled = await enqueue(driver, key="k:cancelled", delay_ms=60_000)
        assert await driver.cancel(cancelled)
        pending = await enqueue(driver, key="k:pending", delay_ms=60_000)
        for job_id in (done, failed, cancelled, pending):
            assert await driver.delete(job_id) is True
            assert await driver.get_job(job_id) is None
            assert await driver.delete(job_id) is False  # already gone
        assert await driver.counts() == dict.fromkeys(JOB_STATES, 0)
        assert await driver.claim(10, LEASE_MS, ["t"]) == []
        for state in ("completed", "failed", "cancelled", "pending"):
            assert await driver.find_job(f"k:{state}") is None
            assert await driver.enqueue(new_request(key=f"k:{state}")) is not None

    async def test_delete_refuses_an_active_job_and_unknown_ids(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        job = await claim_one(driver)
        before = await driver.get_job(job_id)
        assert before is not None
        assert await driver.delete(job_id) is False
        assert await driver.get_job(job_id) == before
        assert await driver.complete(job_id, job.lease_token)  # its worker still holds it
        assert await driver.delete(uuid.uuid4().hex) is False

    async def test_a_delete_racing_a_claim_has_one_winner(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        for _ in range(10):
            job_id = await enqueue(first)
            deleted, claimed = await asyncio.gather(
                first.delete(job_id), second.claim(1, LEASE_MS, ["t"])
            )
            info = await first.get_job(job_id)
            if deleted:
                assert (claimed, info) == ([], None)
            else:
                assert [job.id for job in claimed] == [job_id]
                assert info is not None
                assert info.state == "active"
                assert await second.complete(job_id, claimed[0].lease_token)
                assert await first.delete(job_id)


DASHBOARD_CASES: tuple[str, ...] = tuple(
    name for name in vars(DashboardConformance) if name.startswith("test_")
)
