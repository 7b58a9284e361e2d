"""Progress on every driver: ``set_progress`` keeps a report with a held job, fenced by the lease
token like a heartbeat; ``ctx.progress`` in a handler reaches it, rate-limited, the latest value
kept. Skipped for a driver without ``jobs.spi.ProgressReports`` (it is optional)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from jobs.context import JobContext
from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import JobDriver, JobProgress, ProgressReports

from .helpers import ALL, LEASE_MS, claim_one, enqueue, info_of, wait_until

if TYPE_CHECKING:
    from .helpers import DriverHarness

_DEADLINE_S = 10.0


async def _reporting_driver(harness: DriverHarness) -> Any:
    driver = await harness.driver()
    if not isinstance(driver, ProgressReports):
        pytest.skip("this driver keeps no progress (jobs.spi.ProgressReports is optional)")
    return driver


class _Counted:
    """The harness's driver, counting ``set_progress`` calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def set_progress(self, job_id: str, lease_token: str, progress: str) -> bool:
        self.writes.append(progress)
        held: bool = await self.inner.set_progress(job_id, lease_token, progress)
        return held


async def _progress(driver: JobDriver, job_id: str) -> JobProgress | None:
    return (await info_of(driver, job_id)).progress


class ProgressConformance:
    async def test_set_progress_keeps_the_report_with_the_held_job(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _reporting_driver(driver_harness)
        job_id = await enqueue(driver)
        assert await _progress(driver, job_id) is None
        job = await claim_one(driver)
        assert await driver.set_progress(job_id, job.lease_token, JobProgress(0.25, "a").text())
        assert await _progress(driver, job_id) == JobProgress(0.25, "a")
        assert await driver.set_progress(job_id, job.lease_token, JobProgress(1, None).text())
        assert await _progress(driver, job_id) == JobProgress(1.0, None)
        assert await driver.complete(job_id, job.lease_token)
        info = await info_of(driver, job_id)
        assert (info.state, info.progress) == ("completed", JobProgress(1.0, None))
        page = await driver.list_jobs(state="completed")
        assert [j.progress for j in page.jobs] == [JobProgress(1.0, None)]

    async def test_set_progress_is_fenced_by_the_lease_token(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _reporting_driver(driver_harness)
        job_id = await enqueue(driver)
        first = await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        second = await claim_one(driver)
        assert not await driver.set_progress(job_id, first.lease_token, JobProgress(0.9).text())
        assert await _progress(driver, job_id) is None
        assert await driver.set_progress(job_id, second.lease_token, JobProgress(0.1).text())
        assert await driver.complete(job_id, second.lease_token)
        assert not await driver.set_progress(job_id, second.lease_token, JobProgress(0.5).text())
        assert await _progress(driver, job_id) == JobProgress(0.1)
        assert not await driver.set_progress("no-such-job", "1:x", JobProgress(0.5).text())

    async def test_a_handlers_reports_are_kept_latest_last_and_rate_limited(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = _Counted(await _reporting_driver(driver_harness))
        gate = asyncio.Event()

        async def handler(payload: Any, ctx: JobContext) -> None:
            for step in range(1, 101):
                await ctx.progress(step / 100, f"step {step}")
            await gate.wait()

        registry = JobHandlerRegistry()
        registry.register(ALL[0], handler)
        settings = JobsSettings(concurrency=1, lease_ms=LEASE_MS, heartbeat_ms=40)
        runner = JobRunner(driver, registry, settings)
        job_id = await enqueue(driver)
        runner.start()
        try:
            await wait_until(
                lambda: _has_progress(driver, job_id, JobProgress(1.0, "step 100")),
                timeout=_DEADLINE_S,
                message="the last report kept",
            )
            assert len(driver.writes) <= 3, "100 reports in a tight loop: a write a second"
            assert driver.writes[0] == JobProgress(0.01, "step 1").text(), "the first at once"
        finally:
            gate.set()
            await runner.close()
        info = await info_of(driver, job_id)
        assert (info.state, info.progress) == ("completed", JobProgress(1.0, "step 100"))

    async def test_a_sync_handler_reports_from_its_thread(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await _reporting_driver(driver_harness)

        def handler(payload: Any, ctx: JobContext) -> None:
            ctx.progress_blocking(0.5, "half")

        registry = JobHandlerRegistry()
        registry.register(ALL[0], handler)
        runner = JobRunner(driver, registry, JobsSettings(lease_ms=LEASE_MS, heartbeat_ms=40))
        job_id = await enqueue(driver)
        runner.start()
        try:
            await wait_until(
                lambda: _has_progress(driver, job_id, JobProgress(0.5, "half")),
                timeout=_DEADLINE_S,
                message="the report kept",
            )
        finally:
            await runner.close()

    async def test_a_bad_report_is_the_handlers_error(self, driver_harness: DriverHarness) -> None:
        driver = await _reporting_driver(driver_harness)

        async def handler(payload: Any, ctx: JobContext) -> None:
            await ctx.progress(1.5)

        registry = JobHandlerRegistry()
        registry.register(ALL[0], handler)
        runner = JobRunner(driver, registry, JobsSettings(lease_ms=LEASE_MS, heartbeat_ms=40))
        job_id = await enqueue(driver, max_attempts=1)
        runner.start()
        try:
            await wait_until(
                lambda: _state_is(driver, job_id, "failed"), timeout=_DEADLINE_S, message="failed"
            )
        finally:
            await runner.close()
        info = await info_of(driver, job_id)
        assert info.last_error is not None
        assert "progress fraction must be from 0 to 1, got 1.5" in info.last_error
        assert info.progress is None


async def _has_progress(driver: Any, job_id: str, expected: JobProgress) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.progress == expected


async def _state_is(driver: JobDriver, job_id: str, state: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == state
