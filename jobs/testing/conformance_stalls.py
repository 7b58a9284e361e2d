"""Conformance: attempts count handler failures, stalls count crashes (issue 27, item 5).

- A claim of a pending job counts an attempt; a reclaim of an expired lease counts a *stall*
  and not an attempt (the delivery runs the attempt that stalled again, with its number).
- Past ``max_stalls`` the claim fails the job with ``stalled_error`` (0: the first expired
  lease fails it).
- ``release`` (and ``release_many``) hands a held job back at no cost; ``retry`` with
  ``count_attempt=False`` gives the attempt back.
- The runner: ``RetryLater`` spends no attempt; a handler's ``max_stalls`` governs.

Part of ``DriverConformance``: every driver runs them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jobs.errors import RetryLater
from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import DEFAULT_MAX_STALLS, JobDriver, stalled_error
from jobs.spi.support import to_datetime

from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue, info_of, wait_until

_DEADLINE_S = 10.0


class StallConformance:
    """Stalls apart from attempts, release, retries that spend no attempt."""

    # -- stalls ----------------------------------------------------------------------------------

    async def test_a_stall_is_counted_apart_from_attempts(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, max_attempts=1)
        first = await claim_one(driver)
        assert (first.attempt, first.stalls, first.reclaimed) == (1, 0, False)
        for stall in (1, 2, 3):
            driver_harness.clock.advance(LEASE_MS)
            again = await claim_one(driver)  # no attempt left, yet it runs again
            assert (again.id, again.attempt, again.stalls, again.reclaimed) == (
                job_id,
                1,
                stall,
                True,
            )
            info = await info_of(driver, job_id)
            assert (info.state, info.attempts, info.stalls) == ("active", 1, stall)
            assert (info.max_stalls, info.last_error) == (DEFAULT_MAX_STALLS, None)
        assert await driver.complete(job_id, again.lease_token)
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.stalls) == ("completed", 1, 3)

    async def test_a_job_past_max_stalls_fails_saying_so(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver, max_attempts=5, max_stalls=2)
        await claim_one(driver)
        for _ in range(2):
            clock.advance(LEASE_MS)
            await claim_one(driver)
        clock.advance(LEASE_MS)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.stalls, info.max_stalls) == ("failed", 1, 3, 2)
        assert info.last_error == stalled_error(3, 2)
        assert info.last_error.startswith("StalledTooOftenError: the lease expired without a")
        assert [(e.attempt, e.error, e.at) for e in info.errors] == [
            (1, stalled_error(3, 2), to_datetime(clock.now_ms()))
        ]
        assert info.finished_at == to_datetime(clock.now_ms())
        clock.advance(LEASE_MS)
        assert await driver.claim(10, LEASE_MS, ALL) == []

    async def test_max_stalls_zero_fails_the_job_at_its_first_expired_lease(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, max_stalls=0)
        healthy = await enqueue(driver)
        await driver.claim(2, LEASE_MS, ALL)
        driver_harness.clock.advance(LEASE_MS)
        [again] = await driver.claim(10, LEASE_MS, ALL)
        assert (again.id, again.stalls) == (healthy, 1)
        info = await info_of(driver, job_id)
        assert (info.state, info.stalls, info.last_error) == ("failed", 1, stalled_error(1, 0))

    async def test_a_job_retried_after_a_stall_keeps_its_stalls(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, max_stalls=1)
        await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        held = await claim_one(driver)
        assert await driver.retry(job_id, held.lease_token, delay_ms=0, error="RuntimeError: x")
        second = await claim_one(driver)
        assert (second.attempt, second.stalls, second.reclaimed) == (2, 1, False)
        driver_harness.clock.advance(LEASE_MS)
        assert await driver.claim(10, LEASE_MS, ALL) == []  # its second stall: past max_stalls
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.stalls) == ("failed", 2, 2)

    # -- release ---------------------------------------------------------------------------------

    async def test_release_hands_a_job_back_at_no_cost(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver, max_attempts=1, delay_ms=5_000)
        clock.advance(5_000)
        held = await claim_one(driver)
        clock.advance(1_000)
        assert await driver.release(job_id, held.lease_token)
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.stalls) == ("pending", 0, 0)
        assert (info.last_error, info.errors) == (None, ())
        assert info.run_at == to_datetime(clock.now_ms())  # due now, not after a lease
        assert await driver.heartbeat(job_id, held.lease_token, LEASE_MS) is False
        assert await driver.complete(job_id, held.lease_token) is False
        assert await driver.release(job_id, held.lease_token) is False
        again = await claim_one(driver)
        assert (again.attempt, again.stalls, again.reclaimed) == (1, 0, False)

    async def test_a_release_after_a_stall_keeps_the_stall(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        held = await claim_one(driver)
        assert await driver.release(job_id, held.lease_token)
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, info.stalls) == ("pending", 0, 1)
        again = await claim_one(driver)
        assert (again.attempt, again.stalls) == (1, 1)

    async def test_release_many_fences_each_job_on_its_own(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        ids = [await enqueue(driver) for _ in range(3)]
        first, second, third = sorted(
            await driver.claim(3, LEASE_MS, ALL), key=lambda job: ids.index(job.id)
        )
        assert await driver.complete(third.id, third.lease_token)
        assert await driver.release_many([]) == []
        results = await driver.release_many(
            [
                (first.id, first.lease_token),
                (second.id, first.lease_token),  # another job's token
                (third.id, third.lease_token),  # finished already
                ("no-such-job", first.lease_token),
            ]
        )
        assert results == [True, False, False, False]
        states = [(await info_of(driver, job_id)).state for job_id in ids]
        assert states == ["pending", "active", "completed"]
        assert await driver.release_many([(second.id, second.lease_token)]) == [True]
        assert sorted(job.id for job in await driver.claim(10, LEASE_MS, ALL)) == sorted(ids[:2])

    async def test_a_retry_that_does_not_count_gives_the_attempt_back(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver, max_attempts=1)
        for _ in range(3):
            held = await claim_one(driver)
            assert held.attempt == 1
            error = "RetryLater: busy"
            assert await driver.retry(
                job_id, held.lease_token, delay_ms=100, error=error, count_attempt=False
            )
            info = await info_of(driver, job_id)
            assert (info.state, info.attempts, info.last_error) == ("pending", 0, error)
            clock.advance(100)
        last = await claim_one(driver)
        assert await driver.retry(job_id, last.lease_token, delay_ms=0, error="RuntimeError: x")
        info = await info_of(driver, job_id)
        assert info.attempts == 1
        assert [e.error for e in info.errors] == ["RetryLater: busy"] * 3 + ["RuntimeError: x"]

    # -- the runner ------------------------------------------------------------------------------

    async def test_retry_later_spends_no_attempt(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        calls: list[int] = []

        async def handler(payload: Any) -> None:
            calls.append(len(calls))
            if len(calls) < 4:
                raise RetryLater("the partner is busy", delay_ms=0)

        job_id = await enqueue(driver, max_attempts=1)
        async with _running(driver, handler):
            await wait_until(
                lambda: _state_is(driver, job_id, "completed"),
                timeout=_DEADLINE_S,
                message="the job to complete after three RetryLater",
            )
        info = await info_of(driver, job_id)
        assert (info.state, info.attempts, len(calls)) == ("completed", 1, 4)
        assert len(info.errors) == 3
        assert all(e.error.startswith("RetryLater: the partner is busy") for e in info.errors)

    async def test_the_handlers_max_stalls_governs(self, driver_harness: DriverHarness) -> None:
        """A job stored with the default max_stalls, whose handler allows none: its first
        reclaim fails it without running the handler."""
        driver = await driver_harness.driver()
        ran: list[Any] = []

        async def handler(payload: Any) -> None:
            ran.append(payload)

        job_id = await enqueue(driver)
        await claim_one(driver)  # a worker that dies holding it
        driver_harness.clock.advance(LEASE_MS)
        async with _running(driver, handler, max_stalls=0):
            await wait_until(
                lambda: _state_is(driver, job_id, "failed"),
                timeout=_DEADLINE_S,
                message="the reclaimed job to fail unrun",
            )
        info = await info_of(driver, job_id)
        assert (info.stalls, info.last_error, ran) == (1, stalled_error(1, 0), [])


class _running:
    """A runner of ``handler`` (type "t") on ``driver``, started and closed around a block."""

    def __init__(self, driver: JobDriver, handler: Any, **options: Any) -> None:
        registry = JobHandlerRegistry()
        registry.register("t", handler, **options)
        settings = JobsSettings(lease_ms=LEASE_MS, poll_interval_ms=20, concurrency=2)
        self.runner = JobRunner(driver, registry, settings)

    async def __aenter__(self) -> JobRunner:
        self.runner.start()
        return self.runner

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self.runner.close(drain_timeout_ms=1_000), _DEADLINE_S)


async def _state_is(driver: JobDriver, job_id: str, state: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == state
