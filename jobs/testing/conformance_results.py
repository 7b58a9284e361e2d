"""Results on every driver: a handler's return value is kept with its completed job, written
by the completing call itself (``complete``, or ``complete_many`` for a coalesced batch), read
back by ``get_job``, ``list_jobs`` and ``find_job``, and gone with the job at retention.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import JobDriver

from .helpers import ALL, LEASE_MS, claim_one, enqueue, info_of, wait_until
from .requests import new_request

if TYPE_CHECKING:
    from .helpers import DriverHarness

_DEADLINE_S = 10.0


async def _finished(driver: JobDriver, *job_ids: str) -> bool:
    for job_id in job_ids:
        info = await driver.get_job(job_id)
        if info is None or info.state not in ("completed", "failed"):
            return False
    return True


async def _run(driver: JobDriver, handler: Any, job_ids: list[str], **settings: Any) -> None:
    """Run ``handler`` for type ``t`` until every job of ``job_ids`` finished."""
    registry = JobHandlerRegistry()
    registry.register(ALL[0], handler)
    options: dict[str, Any] = {"concurrency": 4, "lease_ms": LEASE_MS, "heartbeat_ms": 40}
    options.update(settings)
    runner = JobRunner(driver, registry, JobsSettings(**options))
    runner.start()
    try:
        await wait_until(
            lambda: _finished(driver, *job_ids), timeout=_DEADLINE_S, message="jobs finished"
        )
    finally:
        await runner.close()


class ResultsConformance:
    async def test_complete_keeps_the_result_with_the_job(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, key="with-result")
        job = await claim_one(driver)
        result = json.dumps({"pages": 3, "name": "caf\u00e9 \u0000", "ok": [True, None, 1.5]})
        assert await driver.complete(job_id, job.lease_token, result)
        info = await info_of(driver, job_id)
        assert (info.state, info.result) == ("completed", json.loads(result))
        found = await driver.find_job("with-result")
        assert found is not None
        assert found.result == json.loads(result)
        page = await driver.list_jobs(state="completed")
        assert [(j.id, j.result) for j in page.jobs] == [(job_id, json.loads(result))]

    async def test_a_job_without_a_result_reads_none(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        done_id = await enqueue(driver)
        done = await claim_one(driver)
        assert await driver.complete(done_id, done.lease_token)
        failed_id = await enqueue(driver)
        failed = await claim_one(driver)
        assert await driver.fail(failed_id, failed.lease_token, error="boom")
        assert (await info_of(driver, done_id)).result is None
        assert (await info_of(driver, failed_id)).result is None
        assert (await info_of(driver, await enqueue(driver))).result is None

    async def test_a_stale_complete_writes_no_result(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        first = await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        second = await claim_one(driver)
        assert not await driver.complete(job_id, first.lease_token, '"stale"')
        assert await driver.complete_many([(job_id, first.lease_token)], ['"stale"']) == [False]
        assert (await info_of(driver, job_id)).result is None
        assert await driver.complete(job_id, second.lease_token, '"mine"')
        assert (await info_of(driver, job_id)).result == "mine"

    async def test_complete_many_keeps_each_jobs_own_result(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        ids = [await enqueue(driver, payload={"n": n}) for n in range(5)]
        claimed = await driver.claim(5, LEASE_MS, ALL)
        tokens = {job.id: job.lease_token for job in claimed}
        results = [json.dumps({"n": n}) if n % 2 == 0 else None for n in range(5)]
        assert await driver.complete_many([(i, tokens[i]) for i in ids], results) == [True] * 5
        for n, job_id in enumerate(ids):
            info = await info_of(driver, job_id)
            assert (info.state, info.result) == ("completed", {"n": n} if n % 2 == 0 else None)

    async def test_the_result_goes_with_the_job_at_retention(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver(retain_completed_ms=1_000)
        job_id = await enqueue(driver, key="kept-a-while")
        job = await claim_one(driver)
        assert await driver.complete(job_id, job.lease_token, '{"v": 1}')
        driver_harness.clock.advance(1_000)
        assert await driver.get_job(job_id) is None
        again = await driver.enqueue(new_request(key="kept-a-while"))
        assert again is not None
        assert (await info_of(driver, again)).result is None, "a key's new job has no result"

    # -- through the runner ----------------------------------------------------------------

    async def test_a_handlers_return_value_is_its_jobs_result(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()

        async def handler(payload: dict[str, int]) -> dict[str, Any]:
            await asyncio.sleep(0)
            return {"double": payload["n"] * 2, "tags": ["a", "b"]}

        ids = [await enqueue(driver, payload={"n": n}) for n in range(12)]
        await _run(driver, handler, ids)
        for n, job_id in enumerate(ids):
            info = await info_of(driver, job_id)
            assert (info.state, info.result) == ("completed", {"double": 2 * n, "tags": ["a", "b"]})

    async def test_a_sync_handlers_return_value_is_kept_too(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()

        def handler(payload: dict[str, int]) -> list[int]:
            return [payload["n"]]

        job_id = await enqueue(driver, payload={"n": 7})
        await _run(driver, handler, [job_id])
        assert (await info_of(driver, job_id)).result == [7]

    async def test_a_result_that_is_not_json_fails_the_job_naming_it(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()

        async def handler(payload: Any) -> dict[str, Any]:
            return {"pages": {1, 2}}

        job_id = await enqueue(driver, max_attempts=3)
        await _run(driver, handler, [job_id])
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.result) == ("failed", 1, None)
        assert info.last_error is not None
        assert "ResultError" in info.last_error
        assert 'result["pages"]: set is not JSON' in info.last_error

    async def test_a_result_over_the_limit_fails_the_job(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()

        async def handler(payload: Any) -> str:
            return "x" * 100

        job_id = await enqueue(driver)
        await _run(driver, handler, [job_id], max_result_bytes=64)
        info = await info_of(driver, job_id)
        assert (info.state, info.result) == ("failed", None)
        assert info.last_error is not None
        assert "max_result_bytes (64)" in info.last_error
