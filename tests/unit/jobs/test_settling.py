"""The Settler coalesces completes for every driver: one alone goes through ``complete``, those
that come in while it is in flight go together through one ``complete_many``, and once they
overlap, the first of a step's completes waits for the others."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from jobs import InProcessJobDriver, JobQueue, StoreUnavailableError
from jobs.settling import Settler
from jobs.spi import ClaimedJob
from tests.support import wait_until

LEASE_MS = 30_000


class GatedDriver(InProcessJobDriver):
    """Records the settle calls; the first ``complete`` waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []
        self.gate = asyncio.Event()
        self.batch_failures = 0

    async def complete(self, job_id: str, lease_token: str) -> bool:
        self.calls.append(("complete", 1))
        if len(self.calls) == 1:
            await self.gate.wait()
        return await super().complete(job_id, lease_token)

    async def complete_many(self, jobs: Sequence[tuple[str, str]]) -> list[bool]:
        self.calls.append(("complete_many", len(jobs)))
        if self.batch_failures:
            self.batch_failures -= 1
            raise StoreUnavailableError("store is down (test)")
        return await super().complete_many(jobs)


async def claimed(driver: InProcessJobDriver, count: int) -> list[ClaimedJob]:
    queue = JobQueue(driver)
    for n in range(count):
        await queue.enqueue("t", n)
    jobs = await driver.claim(count, LEASE_MS, ("t",))
    assert len(jobs) == count
    return jobs


async def test_completes_arriving_during_one_in_flight_go_together_in_one_call() -> None:
    driver = GatedDriver()
    settler = Settler(driver, LEASE_MS)
    first, *rest = await claimed(driver, 5)
    lone = asyncio.create_task(settler.complete(first))
    await wait_until(lambda: driver.calls == [("complete", 1)], message="the first complete sent")
    others = [asyncio.create_task(settler.complete(job)) for job in rest]
    await asyncio.sleep(0)
    assert driver.calls == [("complete", 1)]  # the others wait for the one in flight
    driver.gate.set()
    assert await asyncio.gather(lone, *others) == [True] * 5
    assert driver.calls == [("complete", 1), ("complete_many", 4)]
    assert (await driver.counts())["completed"] == 5


async def test_once_completes_overlap_the_first_of_a_step_waits_for_the_others() -> None:
    driver = GatedDriver()
    settler = Settler(driver, LEASE_MS)
    jobs = await claimed(driver, 9)
    lone = asyncio.create_task(settler.complete(jobs[0]))
    await wait_until(lambda: driver.calls == [("complete", 1)], message="the first complete sent")
    overlapping = [asyncio.create_task(settler.complete(job)) for job in jobs[1:5]]
    await asyncio.sleep(0)
    driver.gate.set()
    assert await asyncio.gather(lone, *overlapping) == [True] * 5
    # Completes overlapped a send: those of the next step go together from the first one.
    later = [asyncio.create_task(settler.complete(job)) for job in jobs[5:]]
    assert await asyncio.gather(*later) == [True] * 4
    assert driver.calls == [("complete", 1), ("complete_many", 4), ("complete_many", 4)]


async def test_completes_one_at_a_time_make_no_batch_call() -> None:
    driver = GatedDriver()
    driver.gate.set()
    settler = Settler(driver, LEASE_MS)
    for job in await claimed(driver, 3):
        assert await settler.complete(job)
    assert driver.calls == [("complete", 1)] * 3


async def test_a_batch_that_fails_is_settled_job_by_job_after_a_backoff() -> None:
    driver = GatedDriver()
    driver.batch_failures = 1
    settler = Settler(driver, LEASE_MS)
    first, *rest = await claimed(driver, 3)
    lone = asyncio.create_task(settler.complete(first))
    await wait_until(lambda: driver.calls == [("complete", 1)], message="the first complete sent")
    others = [asyncio.create_task(settler.complete(job)) for job in rest]
    await asyncio.sleep(0)
    driver.gate.set()
    assert await asyncio.gather(lone, *others) == [True] * 3
    assert driver.calls == [("complete", 1), ("complete_many", 2), ("complete", 1), ("complete", 1)]
    assert (await driver.counts())["completed"] == 3
