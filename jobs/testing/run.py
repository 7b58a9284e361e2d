"""``run_jobs``: run everything due, in the test, until nothing is due; report what ran.

It runs the application's handlers on a ``JobRunner`` of its own (the application's settings,
registry and driver), so retries, backoffs, timeouts and spans behave as in production. Idle is
observed at the driver: a claim that began after the last change found nothing while no
attempt was in flight. Then, if the context has an outbox relay, committed entries are relayed
and the loop goes on; with ``advance_clock=True`` the ManualClock jumps to the next retry or
delayed job and the loop goes on. The runner is closed (drained) before ``run_jobs`` returns,
so nothing runs between two calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from framework import ApplicationContext

from ..clock import ManualClock, to_epoch_ms
from ..handlers import JobHandlerRegistry
from ..options import DEFAULT_QUEUE
from ..outbox_relay import OutboxRelay
from ..queue import JobQueue
from ..runner import JobRunner
from ..settings import JobsSettings
from ..spi import ClaimedJob, FailedAttempt, JobDriver, JobState
from ..tokens import JOB_DRIVER, JOB_HANDLER_REGISTRY, JOB_RUNNER, JOBS_SETTINGS, OUTBOX_RELAY
from .app_context import TEST_CLOCK
from .waiting import pending_jobs

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_RUNS = 1_000
_POLL_CAP_MS = 50
"""The watch's runner re-claims at least this often: idleness is seen at once on any driver."""


class RunJobsError(AssertionError):
    """``run_jobs`` could not bring the queue to rest (timeout, or a job that never stops)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """A job that ran during ``run_jobs``, as it ended: ``state`` is completed, failed, or
    pending (a retry waiting for its backoff), or cancelled."""

    id: str
    type: str
    state: JobState
    payload: Any
    attempts: int
    last_error: str | None
    key: str | None
    errors: tuple[FailedAttempt, ...] = ()
    """One per failed attempt, newest last (what the driver keeps)."""

    @property
    def ok(self) -> bool:
        return self.state == "completed"


async def run_jobs(
    target: ApplicationContext | JobQueue,
    *,
    advance_clock: bool = False,
    clock: ManualClock | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_runs: int = DEFAULT_MAX_RUNS,
) -> list[JobRun]:
    """Run every due job of a handled type until none is due; each job that ran, in order.

    ``target`` is a context (its driver, handlers, settings and outbox relay) or a JobQueue
    made with a ``registry``. With ``advance_clock``, the clock (the testing context's, or
    ``clock=``) is moved to each waiting retry or delayed job in turn, so backoffs pass at
    once. Raises RunJobsError after ``timeout_s``, or once ``max_runs`` claims were made
    (a job that enqueues itself forever).
    """
    driver, registry, settings, relay, found_clock = _parts(target)
    clock = clock if clock is not None else found_clock
    if advance_clock and clock is None:
        raise ValueError(
            "run_jobs(advance_clock=True) needs a ManualClock: use a testing context "
            "(jobs.testing.builder_for_tests) or pass clock="
        )
    watch = _Watch(driver, max_runs)
    runner = JobRunner(cast(JobDriver, watch), registry, settings)
    watch.in_flight = lambda: runner.in_flight
    try:
        async with asyncio.timeout(timeout_s):
            runner.start()
            await _until_rest(
                watch, relay, clock if advance_clock else None, max_runs, registry.types
            )
    except TimeoutError:
        raise RunJobsError(
            f"run_jobs did not come to rest within {timeout_s} s: {runner.in_flight} "
            f"attempt(s) still in flight ({', '.join(sorted(watch.unsettled)) or 'none'})"
        ) from None
    finally:
        await runner.close(drain_timeout_ms=1_000)
    return [run for run in [await _run_of(driver, job_id) for job_id in watch.ran] if run]


async def _until_rest(
    watch: _Watch,
    relay: OutboxRelay | None,
    clock: ManualClock | None,
    max_runs: int,
    types: Collection[str],
) -> None:
    """Idle, then relay the outbox or move the clock, until neither gives more work."""
    while True:
        await watch.idle()
        if watch.exhausted:
            raise RunJobsError(
                f"run_jobs ran {watch.claims} attempts (max_runs={max_runs}) and jobs are still "
                "due: does a job enqueue itself forever?"
            )
        if relay is not None and await _relay_all(relay):
            watch.changed()
            continue
        if clock is not None:
            due = await watch.next_due(clock.now_ms(), types)
            if due is not None:
                clock.advance(due - clock.now_ms())
                watch.changed()
                continue
        return


async def _relay_all(relay: OutboxRelay) -> int:
    total = 0
    while (published := await relay.relay_once()) > 0:
        total += published
    return total


def _parts(
    target: ApplicationContext | JobQueue,
) -> tuple[JobDriver, JobHandlerRegistry, JobsSettings, OutboxRelay | None, ManualClock | None]:
    if isinstance(target, ApplicationContext):
        if JOB_RUNNER in target and target.get_value(JOB_RUNNER).is_running:
            raise ValueError(
                "run_jobs: the context's job runner is running, so jobs would also run behind "
                "run_jobs' back; build the context with jobs.testing.builder_for_tests"
            )
        relay = target.get_value(OUTBOX_RELAY) if OUTBOX_RELAY in target else None
        clock = target.get_value(TEST_CLOCK) if TEST_CLOCK in target else None
        return (
            target.get_value(JOB_DRIVER),
            target.get_value(JOB_HANDLER_REGISTRY),
            target.get_value(JOBS_SETTINGS),
            relay,
            clock,
        )
    if isinstance(target, JobQueue):
        if target.registry is None:
            raise ValueError(
                "run_jobs(queue) needs to know the handlers: make the queue with "
                "JobQueue(driver, registry=...) or pass the application context"
            )
        return target.driver, target.registry, JobsSettings(), None, None
    raise TypeError(f"run_jobs takes an ApplicationContext or a JobQueue, got {target!r}")


async def _run_of(driver: JobDriver, job_id: str) -> JobRun | None:
    info = await driver.get_job(job_id)
    if info is None:  # pruned (a retention of 0)
        return None
    return JobRun(
        id=info.id,
        type=info.type,
        state=info.state,
        payload=info.payload,
        attempts=info.attempts,
        last_error=info.last_error,
        key=info.key,
        errors=info.errors,
    )


class _Watch:
    """The driver as ``run_jobs``' runner sees it: records claims and settles, tells idleness.

    Idle: a claim found nothing while the runner had no attempt in flight, and neither a
    settle nor a change from outside (``changed``) happened while it was asked (a handler may
    have enqueued a job just before it settled). Every other call goes to the driver unchanged.
    """

    def __init__(self, driver: JobDriver, max_runs: int) -> None:
        self._driver = driver
        self._max_runs = max_runs
        self.exhausted = False
        self.ran: dict[str, None] = {}  # claimed job ids, first claim first
        self.unsettled: set[str] = set()
        self.claims = 0
        self._epoch = 0
        self._idle = asyncio.Event()
        self._dirty = False
        self.in_flight: Callable[[], int] = lambda: len(self.unsettled)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def changed(self) -> None:
        """Something outside the runner changed the queue: idleness must be seen again."""
        self._epoch += 1
        self._idle.clear()
        self._dirty = True

    async def idle(self) -> None:
        await self._idle.wait()

    async def next_due(self, now_ms: int, types: Collection[str]) -> int | None:
        """The earliest future run_at of a pending job of ``types`` (a retry's backoff, a
        delayed job, a scheduled occurrence)."""
        times = [
            run_at
            for info in await pending_jobs(self._driver)
            if info.type in types and (run_at := to_epoch_ms(info.run_at)) > now_ms
        ]
        return min(times, default=None)

    async def claim(
        self, limit: int, lease_ms: int, types: Collection[str], queue: str = DEFAULT_QUEUE
    ) -> list[ClaimedJob]:
        epoch = self._epoch
        if self.claims >= self._max_runs:
            stats = await self._driver.stats()
            self.exhausted = any(stats[t].due for t in types if t in stats)
            if epoch == self._epoch and not self.in_flight():
                self._idle.set()
            return []
        limit = min(limit, self._max_runs - self.claims)
        if queue == DEFAULT_QUEUE:
            jobs = await self._driver.claim(limit, lease_ms, types)
        else:
            jobs = await self._driver.claim(limit, lease_ms, types, queue=queue)
        self.claims += len(jobs)
        for job in jobs:
            self.ran.setdefault(job.id, None)
            self.unsettled.add(job.id)
        if not jobs and epoch == self._epoch and not self.in_flight():
            self._idle.set()
        return jobs

    async def complete(self, job_id: str, lease_token: str, result: str | None = None) -> bool:
        try:
            if result is None:
                return await self._driver.complete(job_id, lease_token)
            return await self._driver.complete(job_id, lease_token, result)
        finally:
            self._settled(job_id)

    async def complete_many(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None = None
    ) -> list[bool]:
        try:
            if results is None:
                return await self._driver.complete_many(jobs)
            return await self._driver.complete_many(jobs, results)
        finally:
            for job_id, _ in jobs:
                self._settled(job_id)

    async def retry(self, job_id: str, lease_token: str, *, delay_ms: int, error: str) -> bool:
        try:
            return await self._driver.retry(job_id, lease_token, delay_ms=delay_ms, error=error)
        finally:
            self._settled(job_id)

    async def fail(self, job_id: str, lease_token: str, *, error: str) -> bool:
        try:
            return await self._driver.fail(job_id, lease_token, error=error)
        finally:
            self._settled(job_id)

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = (DEFAULT_QUEUE,)
    ) -> None:
        if self.exhausted:  # claims return nothing now: wait for run_jobs to give up
            await asyncio.sleep(_POLL_CAP_MS / 1000)
            return
        if self._dirty:
            self._dirty = False
            await asyncio.sleep(0)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_POLL_CAP_MS / 1000):
                await self._driver.wait_for_work(types, min(timeout_ms, _POLL_CAP_MS), queues)

    async def close(self) -> None:
        """The driver belongs to the caller: the runner must not close it."""

    def _settled(self, job_id: str) -> None:
        self.unsettled.discard(job_id)
        self._epoch += 1
        self._dirty = True
