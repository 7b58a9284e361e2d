"""The runner on every driver: every handler shape runs its body; a ready job (prefetch) is
leased, kept, dropped or run.

A ``JobRunner`` at concurrency 1 with ``prefetch`` runs one job and holds the next ones ready.
Lease expiry follows the harness's ManualClock; heartbeats run on the event loop, so each case
waits for a beat the driver answered (observed through a counting wrapper), never for a time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from jobs.handlers import JobHandlerRegistry
from jobs.options import DEFAULT_QUEUE
from jobs.runner import JobRunner
from jobs.settings import JobsSettings
from jobs.spi import ClaimedJob, ClaimLimits, JobDriver

from .handler_shapes import SHAPES, Ran
from .helpers import ALL, LEASE_MS, enqueue, info_of, wait_until

if TYPE_CHECKING:
    from .helpers import DriverHarness

_DEADLINE_S = 10.0
_HEARTBEAT_MS = 40


async def _until(condition: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    await wait_until(condition, timeout=_DEADLINE_S, message=what)


class _Beats:
    """The harness's driver, counting the heartbeats it accepted or refused, per job."""

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner
        self.accepted: dict[str, int] = {}
        self.refused: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        held = await self.inner.heartbeat(job_id, lease_token, lease_ms)
        tally = self.accepted if held else self.refused
        tally[job_id] = tally.get(job_id, 0) + 1
        return held

    async def claim(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str = DEFAULT_QUEUE,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        return await self.inner.claim(limit, lease_ms, types, queue, limits)


class _Gated:
    """A handler recording the job ids it ran; the first one waits for ``gate``."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.gate = asyncio.Event()

    async def run(self, payload: Any) -> None:
        self.ran.append(payload["id"])
        if len(self.ran) == 1:
            await self.gate.wait()


def _runner(driver: JobDriver, handler: _Gated, prefetch: int) -> JobRunner:
    registry = JobHandlerRegistry()
    registry.register(ALL[0], handler.run)
    settings = JobsSettings(
        concurrency=1, prefetch=prefetch, lease_ms=LEASE_MS, heartbeat_ms=_HEARTBEAT_MS
    )
    return JobRunner(driver, registry, settings)


async def _enqueue_named(driver: JobDriver, count: int) -> dict[str, str]:
    """Job ids by name (``job-0``...); jobs due at one instant are claimed in any order."""
    return {
        name: await enqueue(driver, payload={"id": name})
        for name in (f"job-{index}" for index in range(count))
    }


def _split(ids: dict[str, str], handler: _Gated) -> tuple[str, str]:
    """The running job (the one the gate holds) and the other one, ready."""
    running = handler.ran[0]
    (waiting,) = (name for name in ids if name != running)
    return ids[running], ids[waiting]


class _Pair(NamedTuple):
    runner: JobRunner
    handler: _Gated
    ids: dict[str, str]
    running: str
    ready: str


@asynccontextmanager
async def _one_running_one_ready(driver: JobDriver) -> AsyncIterator[_Pair]:
    """Two jobs and a started one-slot runner (prefetch 1): one running, held by the gate,
    and one ready. The gate is opened and the runner closed on the way out."""
    ids = await _enqueue_named(driver, 2)
    handler = _Gated()
    runner = _runner(driver, handler, prefetch=1)
    runner.start()
    try:
        await _until(lambda: (len(handler.ran), runner.ready) == (1, 1), "one ready")
        yield _Pair(runner, handler, ids, *_split(ids, handler))
    finally:
        handler.gate.set()
        await runner.close()


async def _state(driver: JobDriver, job_id: str) -> tuple[str, int]:
    info = await driver.get_job(job_id)
    assert info is not None
    return info.state, info.attempts


class RunnerConformance:
    @pytest.mark.parametrize("shape", sorted(SHAPES))
    async def test_every_handler_shape_runs_its_body_before_its_job_completes(
        self, driver_harness: DriverHarness, shape: str
    ) -> None:
        """A handler that is not a coroutine function but returns an awaitable (a decorator,
        a callable object, a def returning a coroutine...) has it awaited, on the runner's
        loop: the body runs once, then the job completes."""
        driver = await driver_harness.driver()
        ran: Ran = []
        registry = JobHandlerRegistry()
        registry.register(ALL[0], SHAPES[shape](ran))
        settings = JobsSettings(concurrency=2, lease_ms=LEASE_MS, heartbeat_ms=_HEARTBEAT_MS)
        runner = JobRunner(driver, registry, settings)
        job_id = await enqueue(driver, payload={"id": shape})
        runner.start()
        try:
            await _until(lambda: _completed(driver, job_id), f"the {shape} job completed")
        finally:
            await runner.close()
        assert [payload_id for payload_id, _ in ran] == [shape], "the body ran once"
        loop_thread = threading.current_thread().name
        body_thread = ran[0][1]
        if shape == "sync_function":
            assert body_thread != loop_thread, "a sync handler runs in a worker thread"
        else:
            assert body_thread == loop_thread, "an awaitable is awaited on the runner's loop"
        assert await _state(driver, job_id) == ("completed", 1)

    async def test_a_ready_job_keeps_its_lease_and_runs_once(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = _Beats(await driver_harness.driver())
        other = await driver_harness.driver()
        async with _one_running_one_ready(driver) as (_, handler, _, first, second):
            driver_harness.clock.advance(LEASE_MS - 1)
            beats = {job_id: driver.accepted.get(job_id, 0) for job_id in (first, second)}
            await _until(
                lambda: all(driver.accepted.get(job_id, 0) > n + 1 for job_id, n in beats.items()),
                "two beats (one surely sent after the advance) of each job",
            )
            driver_harness.clock.advance(2)  # past the lease of the claim: only beats hold it
            assert await other.claim(10, LEASE_MS, ALL) == []
            handler.gate.set()
            await _until(lambda: _all_completed(driver, first, second), "both completed")
            assert sorted(handler.ran) == ["job-0", "job-1"]
            assert await _state(driver, second) == ("completed", 1)

    async def test_a_ready_job_cancelled_by_an_operator_is_dropped_unrun(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = _Beats(await driver_harness.driver())
        async with _one_running_one_ready(driver) as (runner, handler, ids, first, second):
            assert await driver.cancel(second)
            await _until(lambda: runner.ready == 0, "the cancelled job dropped")
            assert driver.refused.get(second, 0) >= 1
            assert runner.stats["cancelled"] == 1
            handler.gate.set()
            await _until(lambda: _completed(driver, first), "the running job completed")
            assert handler.ran == [next(name for name, id_ in ids.items() if id_ == first)]
            assert await _state(driver, second) == ("cancelled", 1)

    async def test_close_runs_the_ready_jobs_before_it_returns(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        ids = await _enqueue_named(driver, 3)
        handler = _Gated()
        runner = _runner(driver, handler, prefetch=2)
        runner.start()
        await _until(lambda: (runner.running_handlers, runner.ready) == (1, 2), "two ready")
        closing = asyncio.ensure_future(runner.close())
        await asyncio.sleep(0)
        assert not closing.done()
        handler.gate.set()
        await asyncio.wait_for(closing, _DEADLINE_S)
        assert sorted(handler.ran) == ["job-0", "job-1", "job-2"]
        for job_id in ids.values():
            assert await _state(driver, job_id) == ("completed", 1)

    async def test_jobs_past_the_drain_deadline_are_handed_back_at_no_cost(
        self, driver_harness: DriverHarness
    ) -> None:
        """The running job (cancelled) and the ready one (never started) are released: due at
        once, their attempt given back, no stall."""
        driver = await driver_harness.driver()
        other = await driver_harness.driver()
        ids = await _enqueue_named(driver, 2)
        handler = _Gated()
        runner = _runner(driver, handler, prefetch=1)
        runner.start()
        await _until(lambda: runner.ready == 1, "one ready")
        await runner.close(drain_timeout_ms=50)
        assert (runner.ready, runner.in_flight) == (0, 0)
        assert len(handler.ran) == 1
        for job_id in ids.values():
            info = await info_of(driver, job_id)
            assert (info.state, info.attempts, info.stalls) == ("pending", 0, 0)
        again = await other.claim(10, LEASE_MS, ALL)  # at once: no lease to wait out
        assert sorted((job.id, job.attempt, job.stalls, job.reclaimed) for job in again) == sorted(
            (job_id, 1, 0, False) for job_id in ids.values()
        )


async def _all_completed(driver: JobDriver, *job_ids: str) -> bool:
    return all([await _completed(driver, job_id) for job_id in job_ids])


async def _completed(driver: JobDriver, job_id: str) -> bool:
    return (await _state(driver, job_id))[0] == "completed"
