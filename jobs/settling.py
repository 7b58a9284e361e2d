"""Settling: the terminal store call of an attempt (complete, retry, fail), through outages.

A settle that fails is retried with backoff while the lease lasts; past that, it gives up and
the job runs again after its lease (at least once). Every settle of a runner goes through one
``Settler``, the one place that talks to the driver about outcomes. Completes are coalesced
here, for every driver: one sent while none is in flight goes at once (``complete``), and
those that come in meanwhile go together next, in one ``complete_many``; once they overlap
like that, the first of a step's completes waits for the others (``coalescing``), so a store
with round trips settles a claimed batch in one statement.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from operator import itemgetter

from loguru import logger

from .coalescing import Coalescer
from .failures import FailureStreak, describe_cause
from .health import StoreContact
from .retry import exponential_backoff
from .spi.driver import JobDriver
from .spi.records import ClaimedJob

STORE_BACKOFF = exponential_backoff(100, 30_000, jitter=0)
"""Between retries of the runner's own failing store calls (not job retries): the nominal
delays, as logged."""


class Settler:
    """Settles claimed jobs on ``driver``; each call returns False when the token was stale."""

    def __init__(
        self, driver: JobDriver, lease_ms: int, contact: StoreContact | None = None
    ) -> None:
        self.driver = driver
        self.lease_ms = lease_ms
        self.contact = contact or StoreContact()
        self._failures = FailureStreak("settling jobs", level="WARNING")
        self._completes: Coalescer[tuple[str, str, str | None], bool] = Coalescer(
            self._complete_group, name="job completes", key=itemgetter(0)
        )

    async def complete(self, job: ClaimedJob, result: str | None = None) -> bool:
        """Complete ``job``, keeping ``result`` (JSON text) in the same store write."""
        driver, completes = self.driver, self._completes
        try:
            if completes.go_alone():  # the common case: sent from here, one coroutine less
                try:
                    done = await _complete_one(driver, job.id, job.lease_token, result)
                finally:
                    completes.alone_done()
            else:
                done = await completes.submit((job.id, job.lease_token, result))
        except Exception as exc:
            return await self.call_store(
                lambda: _complete_one(driver, job.id, job.lease_token, result), failed=exc
            )
        self.contact.answered()
        if self._failures.count:
            self._failures.succeeded()
        return done

    async def _complete_group(self, group: list[tuple[str, str, str | None]]) -> list[bool]:
        if len(group) == 1:
            return [await _complete_one(self.driver, *group[0])]
        pairs = [(job_id, token) for job_id, token, _ in group]
        results = [result for _, _, result in group]
        if any(result is not None for result in results):
            return await self.driver.complete_many(pairs, results)
        return await self.driver.complete_many(pairs)

    async def retry(
        self, job: ClaimedJob, *, delay_ms: int, error: str, count_attempt: bool = True
    ) -> bool:
        driver = self.driver
        if count_attempt:
            return await self.call_store(
                lambda: driver.retry(job.id, job.lease_token, delay_ms=delay_ms, error=error)
            )
        return await self.call_store(
            lambda: driver.retry(
                job.id, job.lease_token, delay_ms=delay_ms, error=error, count_attempt=False
            )
        )

    async def release(self, jobs: list[ClaimedJob]) -> int:
        """Hand ``jobs`` back to the store at no cost (``release_many``), once, best effort: a
        job not released (the store unreachable, a token gone stale) runs again after its
        lease, as it would have without this call. How many were released."""
        if not jobs:
            return 0
        try:
            released = await self.driver.release_many([(job.id, job.lease_token) for job in jobs])
        except Exception as exc:
            self.contact.failed(exc)
            logger.warning(
                "handing {} job(s) back failed: {}; they run again after their leases",
                len(jobs),
                describe_cause(exc),
            )
            return 0
        self.contact.answered()
        return sum(released)

    async def fail(self, job: ClaimedJob, *, error: str) -> bool:
        driver = self.driver
        return await self.call_store(lambda: driver.fail(job.id, job.lease_token, error=error))

    async def call_store(
        self, call: Callable[[], Awaitable[bool]], *, failed: Exception | None = None
    ) -> bool:
        """A settle call, retried with backoff through store outages while the lease lasts;
        ``failed``: the error of a first try already made (the next one waits a backoff)."""
        deadline: float | None = None
        failures = 0
        while True:
            if failed is None:
                try:
                    settled = await call()
                except Exception as exc:
                    failed = exc
                else:
                    self.contact.answered()
                    self._failures.succeeded()
                    return settled
            self.contact.failed(failed)
            if deadline is None:  # the clock is read only once a call failed
                deadline = time.monotonic() + self.lease_ms / 1000
            failures += 1
            delay_ms = STORE_BACKOFF(failures)
            if time.monotonic() + delay_ms / 1000 > deadline:
                logger.error(
                    "settling a job failed {} times, for as long as its lease: {}; it will run "
                    "again after its lease",
                    failures,
                    describe_cause(failed),
                )
                return False
            self._failures.failed(failed, retry_in_ms=delay_ms)
            failed = None
            await asyncio.sleep(delay_ms / 1000)


def _complete_one(
    driver: JobDriver, job_id: str, token: str, result: str | None
) -> Awaitable[bool]:
    """``driver.complete``, passing ``result`` only when there is one: a driver written before
    results existed still completes the jobs of handlers that return None."""
    if result is None:
        return driver.complete(job_id, token)
    return driver.complete(job_id, token, result)
