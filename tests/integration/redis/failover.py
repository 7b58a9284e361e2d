"""A producer and a runner on one driver, for failovers mid-run: what was acknowledged, what ran.

Job ``n`` is enqueued until an enqueue of it returns an id (*acknowledged*); one that raised
``StoreUnavailableError`` (Redis away, or ``ReplicationTimeoutError``: not confirmed by the
replicas) is tried again. Such an unconfirmed job may still run; it is not counted lost or
unexpected. The check (Jepsen's total-queue checker, in short): every acknowledged job runs and
completes (lost = 0), every execution is of a job the test enqueued (unexpected = 0), and a job
runs more than once only because the failover lost what the runner had written of it: at most
the jobs whose outcome was in flight when it struck, which are those the runner held (running,
and claimed ahead: concurrency + prefetch) and those whose handler had returned but whose settle
was not yet confirmed (a slot frees when the handler returns; its settle rides in the settle
batch: at most one per slot).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from jobs import JobContext, JobHandlerRegistry, JobQueue, JobRunner, JobsSettings
from jobs.errors import StoreUnavailableError
from redis_jobs import RedisJobDriver
from tests.support import wait_until

JOB_TYPE = "failover.work"
CONCURRENCY = 10
LEASE_MS = 2_000
HANDLER_S = 0.005
RETRY_GAP_S = 0.02
DEADLINE_S = 30.0


@dataclass
class Load:
    """``driver`` enqueueing and draining jobs; the record of what happened."""

    driver: RedisJobDriver
    acknowledged: dict[str, int] = field(default_factory=dict)
    """Job id -> n, for every enqueue that returned an id."""
    refusals: int = 0
    wrong_errors: list[BaseException] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)
    numbers: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.queue = JobQueue(self.driver)
        registry = JobHandlerRegistry()
        registry.register(JOB_TYPE, self.handle)
        self.runner = JobRunner(
            self.driver,
            registry,
            JobsSettings(concurrency=CONCURRENCY, lease_ms=LEASE_MS, poll_interval_ms=100),
        )

    async def handle(self, payload: dict[str, int], ctx: JobContext) -> None:
        self.runs[ctx.id] += 1
        self.numbers.add(payload["n"])
        await asyncio.sleep(HANDLER_S)

    async def enqueue(self, n: int) -> None:
        """Enqueue job ``n`` until it is acknowledged."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                job_id = await self.queue.enqueue(JOB_TYPE, {"n": n})
            except StoreUnavailableError:
                self.refusals += 1
            except Exception as exc:  # any other error is a defect (a raw redis error, say)
                self.wrong_errors.append(exc)
                return
            else:
                assert job_id is not None
                self.acknowledged[job_id] = n
                return
            assert time.monotonic() < deadline, f"job {n} was never acknowledged"
            await asyncio.sleep(RETRY_GAP_S)

    async def produce(self, numbers: range, gap_s: float) -> None:
        for n in numbers:
            await self.enqueue(n)
            await asyncio.sleep(gap_s)

    async def all_ran(self) -> None:
        """Wait until every acknowledged job has run and is completed."""

        async def done() -> bool:
            if not set(self.acknowledged) <= set(self.runs):
                return False
            counts = await self.driver.counts()
            return counts["pending"] == 0 and counts["active"] == 0

        await wait_until(done, timeout=DEADLINE_S, interval=0.05, message="every job to run")

    def check(self, enqueued: range) -> None:
        assert self.wrong_errors == []
        lost = set(self.acknowledged) - set(self.runs)
        assert lost == set(), f"{len(lost)} acknowledged jobs never ran"
        unexpected = self.numbers - set(enqueued)
        assert unexpected == set()
        assert set(self.acknowledged.values()) == set(enqueued)
        duplicates = sum(count - 1 for count in self.runs.values())
        in_flight = 2 * CONCURRENCY + self.runner.prefetch
        assert duplicates <= in_flight, f"{duplicates} duplicate runs, {in_flight} in flight"
