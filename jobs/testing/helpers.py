"""Helpers of the conformance suites: the harness protocol, requests, enqueue and claim,
waiting on a condition with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from jobs.clock import ManualClock
from jobs.spi import ClaimedJob, JobDriver, JobInfo

from .requests import new_request

LEASE_MS = 30_000
ALL = ("t",)


class DriverHarness(Protocol):
    """Opens drivers on one store; every driver it opens reads ``clock``.

    Optional, for the cases that need them (a case skips when its harness lacks one):

    - ``checks_requests = False``: the driver trusts its requests to come from a
      ``JobQueue`` and does not refuse a bad one itself (the in-process driver); by default
      a driver refuses a ``JobRequest`` whose numbers are out of range (``check_request``).
    - ``named_queues = False``: the driver keeps every job in ``"default"`` and refuses a
      request naming another queue (``DriverError``); the cases that store jobs in named
      queues skip.
    - ``keys_per_queue = True``: an idempotency key is unique within its queue only (the
      same key may hold a live job in each queue); by default a live key is taken in every
      queue (Redis keeps each queue in a hash slot of its own: two queues cannot be checked in
      one atomic step).
    - ``type_limits_per_queue = True``: a type's fleet limit (``global_concurrency``,
      ``rate_limit``) counts its claims in each queue apart; by default across every queue.
    - ``workflows_in_one_queue = True``: the driver refuses a workflow whose jobs span queues
      (``DriverError`` naming the rule); by default a workflow may mix queues.
    - ``plant(record)``: write a malformed job record straight into the store (see
      ``conformance_malformed``), to prove a claim fails it alone.
    """

    clock: ManualClock

    async def driver(
        self, *, retain_completed_ms: int | None = None, retain_failed_ms: int | None = None
    ) -> JobDriver:
        """A driver on the harness's store (a new client where the store allows several).

        The harness closes every driver it opened, and cleans the store, at teardown.
        """
        ...


async def enqueue(driver: JobDriver, job_type: str = "t", **fields: Any) -> str:
    job_id = await driver.enqueue(new_request(job_type, **fields))
    assert job_id is not None
    return job_id


async def claim_one(driver: JobDriver, types: Collection[str] = ALL) -> ClaimedJob:
    claimed = await driver.claim(1, LEASE_MS, types)
    assert len(claimed) == 1, f"expected one claimable job, got {claimed}"
    return claimed[0]


def ms(info: JobInfo, field: str) -> int | None:
    value = getattr(info, field)
    return None if value is None else round(value.timestamp() * 1000)


async def info_of(driver: JobDriver, job_id: str) -> JobInfo:
    info = await driver.get_job(job_id)
    assert info is not None, f"job {job_id} is gone"
    return info


async def failed_job(driver: JobDriver, job_type: str = "t", **fields: object) -> str:
    """A job that ran once and failed for good."""
    job_id = await enqueue(driver, job_type, max_attempts=1, **fields)
    claimed = await driver.claim(1, LEASE_MS, [job_type])
    assert [c.id for c in claimed] == [job_id]
    assert await driver.fail(job_id, claimed[0].lease_token, error="RuntimeError: boom")
    return job_id


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - a deadline for polling, not a cancel scope
    interval: float = 0.005,
    message: str = "condition",
) -> None:
    """Poll ``condition`` until it holds; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        await asyncio.sleep(interval)
