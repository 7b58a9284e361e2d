"""Claim cost with priorities and limits (issue 30): ``claim(10)`` among 100,000 due pending
jobs, all of priority 0 (today's plain claim) against the same backlog spread over 5
priorities, and against the plain backlog claimed under fleet-wide limits (``LIMITS``: a
global concurrency and a rate, both too large to hold a job back, so the figure is what
counting, choosing and recording under them costs a claim).

Each claimed batch is completed (untimed) before the next claim, so the backlog shrinks by 10
a claim and the active set stays small. The claim must stay index-backed: its cost flat in the
backlog, and the 5-priority figure within 20% of the plain one.
"""

from __future__ import annotations

import statistics
import time
import uuid

from jobs import JobDriver
from jobs.spi import ClaimLimits, FleetLimit, JobRequest

BATCH = 1_000
CLAIM = 10
PRIORITIES = (-2, -1, 0, 1, 2)
LIMITS = ClaimLimits(types={"bench.claim": FleetLimit(concurrency=10_000, rate=1_000_000)})


async def fill(driver: JobDriver, total: int, priorities: tuple[int, ...]) -> None:
    """``total`` due jobs of one type, priorities taken in turn."""
    for start in range(0, total, BATCH):
        batch = [
            JobRequest(
                id=uuid.uuid4().hex,
                type="bench.claim",
                payload="null",
                max_attempts=1,
                priority=priorities[(start + i) % len(priorities)],
            )
            for i in range(min(BATCH, total - start))
        ]
        await driver.enqueue_many(batch)


async def claim_times(
    driver: JobDriver, claims: int, limits: ClaimLimits | None = None
) -> list[float]:
    """Milliseconds of each of ``claims`` claims of ``CLAIM`` jobs (the first 20 untimed:
    statements prepared on the pooled connections), under ``limits`` if given."""
    times = []
    for index in range(claims + 20):
        started = time.perf_counter()
        if limits is None:
            claimed = await driver.claim(CLAIM, 60_000, ["bench.claim"])
        else:
            claimed = await driver.claim(CLAIM, 60_000, ["bench.claim"], limits=limits)
        elapsed = (time.perf_counter() - started) * 1000
        assert len(claimed) == CLAIM, "the backlog ran out"
        await driver.complete_many([(job.id, job.lease_token) for job in claimed])
        if index >= 20:
            times.append(elapsed)
    return times


SMALL = 5_000
"""The backlog of the flatness check: the 5-priority claim among this many jobs."""


async def claim_row(
    plain: JobDriver,
    prioritized: JobDriver,
    small: JobDriver,
    limited: JobDriver,
    total: int,
    claims: int = 300,
) -> tuple[float, float, float, float]:
    """Median claim ms on a store of ``total`` plain jobs, on one of ``total`` jobs over
    ``PRIORITIES``, on one of ``SMALL`` jobs over ``PRIORITIES`` (flat: about the same), and
    on one of ``total`` plain jobs claimed under ``LIMITS``."""
    await fill(plain, total, (0,))
    await fill(prioritized, total, PRIORITIES)
    await fill(small, SMALL, PRIORITIES)
    await fill(limited, total, (0,))
    return (
        statistics.median(await claim_times(plain, claims)),
        statistics.median(await claim_times(prioritized, claims)),
        statistics.median(await claim_times(small, claims)),
        statistics.median(await claim_times(limited, claims, LIMITS)),
    )
