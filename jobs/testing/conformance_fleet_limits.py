"""Conformance: fleet-wide limits enforced by the store in its claim (issue 30, item 4;
``jobs.spi.limits``). A type's ``global_concurrency`` counts the jobs held (leased, the lease
live) by every client of the store; its ``rate_limit`` the claims in any window of the store's
clock; a queue's limit counts every type of the queue together. A claim takes no job past a
limit: the job stays pending with no attempt and no stall spent, other types are claimed beside
it, and the claim says what was held back and when a rate window turns (``ClaimedJobs``). A
type's limit counts its jobs in every queue, unless the harness says ``type_limits_per_queue``
(Redis: each queue a hash slot of its own, and a claim reaches one slot).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection
from typing import Any

import pytest

from jobs.handlers import JobHandlerRegistry
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import ClaimedJob, ClaimedJobs, ClaimLimits, FleetLimit, JobDriver

from .helpers import LEASE_MS, DriverHarness, enqueue, info_of, wait_until

_TYPES = ("limited", "free")
_DEADLINE_S = 10.0


async def _claim(
    driver: JobDriver,
    limits: ClaimLimits,
    limit: int = 10,
    types: Collection[str] = _TYPES,
    queue: str = "default",
) -> ClaimedJobs:
    if queue == "default":
        jobs = await driver.claim(limit, LEASE_MS, types, limits=limits)
    else:
        jobs = await driver.claim(limit, LEASE_MS, types, queue, limits=limits)
    assert isinstance(jobs, ClaimedJobs), "a claim given limits returns ClaimedJobs"
    return jobs


def _by_type(jobs: list[ClaimedJob]) -> dict[str, int]:
    return dict(Counter(job.type for job in jobs))


async def _complete(driver: JobDriver, jobs: list[ClaimedJob]) -> None:
    for job in jobs:
        assert await driver.complete(job.id, job.lease_token)


class FleetLimitConformance:
    """Limits counted by the store, across clients, in the claim's own atomic step."""

    async def test_a_global_concurrency_caps_the_jobs_held_across_every_client(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        other = await driver_harness.driver()
        limits = ClaimLimits(types={"limited": FleetLimit(concurrency=2)})
        limited = [await enqueue(driver, "limited") for _ in range(5)]
        for _ in range(3):
            await enqueue(driver, "free")
        first = await _claim(driver, limits)
        assert _by_type(first) == {"limited": 2, "free": 3}
        assert first.held == frozenset()
        again = await _claim(other, limits)  # another client: the two held count there too
        assert list(again) == []
        assert again.held == {"limited"}
        assert again.retry_ms is None, "a full concurrency frees at a settle: no time known"
        held_back = [job_id for job_id in limited if job_id not in {j.id for j in first}]
        for job_id in held_back:
            info = await info_of(driver, job_id)
            assert (info.state, info.attempts, info.stalls) == ("pending", 0, 0)
        await _complete(driver, [job for job in first if job.type == "limited"][:1])
        assert _by_type(await _claim(other, limits)) == {"limited": 1}
        assert list(await _claim(driver, limits)) == []

    async def test_a_types_limit_counts_its_jobs_in_every_queue_unless_per_queue(
        self, driver_harness: DriverHarness
    ) -> None:
        if getattr(driver_harness, "named_queues", True) is False:
            pytest.skip("the driver keeps every job in the default queue")
        driver = await driver_harness.driver()
        limits = ClaimLimits(types={"limited": FleetLimit(concurrency=2)})
        for queue in ("emails", "exports"):
            for _ in range(2):
                await enqueue(driver, "limited", queue=queue)
        assert _by_type(await _claim(driver, limits, queue="emails")) == {"limited": 2}
        other = await _claim(driver, limits, queue="exports")
        if getattr(driver_harness, "type_limits_per_queue", False):
            assert _by_type(other) == {"limited": 2}, "counted in each queue apart"
        else:
            assert list(other) == [], "the two held in another queue count"
            assert other.held == {"limited"}

    async def test_a_lease_that_expired_no_longer_counts_and_its_reclaim_does(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        limits = ClaimLimits(types={"limited": FleetLimit(concurrency=2)})
        for _ in range(4):
            await enqueue(driver, "limited")
        assert len(await _claim(driver, limits)) == 2
        driver_harness.clock.advance(LEASE_MS + 1)  # their worker died: the leases ran out
        retaken = await _claim(driver, limits)
        assert len(retaken) == 2, "expired leases hold nothing"
        assert list(await _claim(driver, limits)) == [], "the two taken now hold the places"

    async def test_a_claim_takes_no_more_of_a_type_than_its_room_and_fills_up_with_others(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        limits = ClaimLimits(types={"limited": FleetLimit(concurrency=3)})
        for _ in range(8):
            await enqueue(driver, "limited", priority=5)  # first in the claim's order
        for _ in range(8):
            await enqueue(driver, "free")
        assert _by_type(await _claim(driver, limits, limit=5)) == {"limited": 3, "free": 2}
        assert _by_type(await _claim(driver, limits, limit=4)) == {"free": 4}

    async def test_a_rate_limit_admits_at_most_its_count_in_any_window(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        limits = ClaimLimits(types={"limited": FleetLimit(rate=3, per_ms=1_000)})
        for _ in range(10):
            await enqueue(driver, "limited")
        first = await _claim(driver, limits)
        assert len(first) == 3
        await _complete(driver, first)  # settled: the rate still counts their claims
        clock.advance(400)
        held = await _claim(driver, limits)
        assert (list(held), held.held, held.retry_ms) == ([], frozenset({"limited"}), 600)
        clock.advance(300)
        second = await _claim(driver, limits, limit=2)  # the window still holds the first 3
        assert list(second) == []
        clock.advance(300)  # the first three's window has turned
        second = await _claim(driver, limits, limit=2)
        assert len(second) == 2
        clock.advance(500)
        third = await _claim(driver, limits)
        assert len(third) == 1, "two claims in the last 1000 ms: one more place"
        assert (await _claim(driver, limits)).retry_ms == 500
        for job in [*second, *third]:
            assert job.attempt == 1

    async def test_a_queue_limit_counts_every_type_of_the_queue_together(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        limits = ClaimLimits(queue=FleetLimit(concurrency=3))
        for job_type in ("limited", "free", "limited", "free", "free"):
            await enqueue(driver, job_type)
        taken = await _claim(driver, limits)
        assert len(taken) == 3
        refused = await _claim(driver, limits)
        assert (list(refused), refused.held) == ([], frozenset(_TYPES))
        await _complete(driver, taken[:2])
        assert len(await _claim(driver, limits)) == 2

    async def test_a_type_with_both_limits_is_held_by_the_fuller_one(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        limits = ClaimLimits(types={"limited": FleetLimit(concurrency=2, rate=3)})
        for _ in range(6):
            await enqueue(driver, "limited")
        first = await _claim(driver, limits)
        assert len(first) == 2  # concurrency first
        await _complete(driver, first)
        second = await _claim(driver, limits)
        assert len(second) == 1  # then the rate: 3 claims in the window
        clock.advance(1_000)  # the window turned; the one claimed holds its place
        assert len(await _claim(driver, limits)) == 1
        full = await _claim(driver, limits)
        assert (list(full), full.held, full.retry_ms) == ([], frozenset({"limited"}), None)

    async def test_runners_on_two_clients_never_run_more_than_the_global_concurrency(
        self, driver_harness: DriverHarness
    ) -> None:
        running = 0
        most = 0
        done = 0

        async def limited(payload: Any) -> None:
            nonlocal running, most, done
            running += 1
            most = max(most, running)
            try:
                await asyncio.sleep(0.02)
            finally:
                running -= 1
            done += 1

        free_done: list[int] = []

        async def free(payload: Any) -> None:
            free_done.append(payload["n"])

        first = await driver_harness.driver()
        for n in range(12):
            await enqueue(first, "limited", payload={"n": n})
        for n in range(30):
            await enqueue(first, "free", payload={"n": n})
        runners = []
        for _ in range(2):
            registry = JobHandlerRegistry()
            registry.register("limited", limited, global_concurrency=2)
            registry.register("free", free)
            settings = JobsSettings(
                concurrency=4, lease_ms=LEASE_MS, heartbeat_ms=40, poll_interval_ms=50
            )
            runners.append(JobRunner(await driver_harness.driver(), registry, settings))
        for runner in runners:
            runner.start()
        try:
            await wait_until(
                lambda: done == 12 and len(free_done) == 30,
                timeout=_DEADLINE_S,
                message="every job of both types done",
            )
        finally:
            for runner in runners:
                await runner.close()
        assert most == 2, f"{most} limited jobs ran at once across two runners"
