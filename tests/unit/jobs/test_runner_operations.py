"""The runner's side of operating a queue: handler-steered outcomes, cancel, live workers."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from jobs import (
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
    ManualClock,
    PermanentError,
    RetryLater,
)
from tests.support import captured_logs, wait_until


class Rig:
    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock
        self.driver = InProcessJobDriver(clock=clock)
        self.registry = JobHandlerRegistry()
        self.queue = JobQueue(self.driver)
        self.runners: list[JobRunner] = []

    def runner(self, **settings: Any) -> JobRunner:
        runner = JobRunner(self.driver, self.registry, JobsSettings(**settings))
        self.runners.append(runner)
        runner.start()
        return runner

    async def state(self, job_id: str | None) -> str:
        assert job_id is not None
        info = await self.driver.get_job(job_id)
        assert info is not None
        return info.state

    async def settled(self, job_id: str | None, state: str) -> None:
        async def reached() -> bool:
            return await self.state(job_id) == state

        await wait_until(reached, message=f"job {job_id} {state}")


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    rig = Rig()
    yield rig
    for runner in rig.runners:
        await runner.close()
    await rig.driver.close()


async def test_permanent_error_fails_the_job_at_once(rig: Rig) -> None:
    async def bounce(payload: Any) -> None:
        raise PermanentError("bounced")

    rig.registry.register("mail", bounce, max_attempts=5)
    job_id = await rig.queue.enqueue("mail")
    rig.runner()
    await rig.settled(job_id, "failed")
    info = await rig.queue.get_job(job_id or "")
    assert info is not None
    assert (info.attempts, len(info.errors)) == (1, 1)
    assert info.errors[0].error.startswith("PermanentError: bounced")


async def test_retry_later_sets_the_delay_and_spends_no_attempt() -> None:
    clock = ManualClock()
    rig = Rig(clock)
    calls: list[int] = []

    async def busy(payload: Any, ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise RetryLater("rate limited", delay_ms=60_000)

    rig.registry.register("api", busy, max_attempts=2)
    job_id = await rig.queue.enqueue("api")
    rig.runner()
    try:
        await wait_until(lambda: calls == [1], message="the first attempt")

        async def pending_again() -> bool:
            info = await rig.driver.get_job(job_id or "")
            return info is not None and info.state == "pending" and len(info.errors) == 1

        async def pending_twice() -> bool:
            info = await rig.driver.get_job(job_id or "")
            return info is not None and info.state == "pending" and len(info.errors) == 2

        await wait_until(pending_again, message="the retry")
        info = await rig.driver.get_job(job_id or "")
        assert info is not None
        assert round(info.run_at.timestamp() * 1000) == clock.now_ms() + 60_000
        assert info.errors[0].error.startswith("RetryLater: rate limited")
        assert info.attempts == 0  # the attempt is not spent
        clock.advance(60_000)
        await wait_until(lambda: calls == [1, 1], message="attempt 1 again")
        await wait_until(pending_twice, message="the second retry")  # never spent: no end
    finally:
        for runner in rig.runners:
            await runner.close()


def test_retry_later_needs_a_delay() -> None:
    with pytest.raises(ValueError, match="delay_ms"):
        RetryLater(delay_ms=-1)


async def test_the_context_carries_key_and_run_at_and_logs_carry_the_job(rig: Rig) -> None:
    seen: list[tuple[str | None, datetime | None]] = []

    async def report(payload: Any, ctx: JobContext) -> None:
        from loguru import logger

        seen.append((ctx.key, ctx.run_at))
        logger.info("building report")

    def threaded(payload: Any, ctx: JobContext) -> None:
        from loguru import logger

        logger.info("in a thread")

    rig.registry.register("report", report)
    rig.registry.register("sync", threaded)
    run_at = datetime.fromtimestamp(round(time.time() - 5), tz=UTC)
    job_id = await rig.queue.enqueue("report", key="report:7", run_at=run_at)
    sync_id = await rig.queue.enqueue("sync")
    with captured_logs("INFO") as logs:
        rig.runner()
        await rig.settled(job_id, "completed")
        await rig.settled(sync_id, "completed")
    assert seen == [("report:7", run_at)]
    job_fields = ("job_id", "job_type", "attempt", "job_key")  # (and trace ids while tracing)
    extras = {r["message"]: {k: r["extra"][k] for k in job_fields} for r in logs}
    assert extras["building report"] == {
        "job_id": job_id,
        "job_type": "report",
        "attempt": 1,
        "job_key": "report:7",
    }
    assert extras["in a thread"] == {
        "job_id": sync_id,
        "job_type": "sync",
        "attempt": 1,
        "job_key": None,
    }


async def test_cancelling_a_running_job_interrupts_its_handler_within_a_heartbeat(
    rig: Rig,
) -> None:
    reasons: list[tuple[str | None, float]] = []
    started = asyncio.Event()

    async def long(payload: Any, ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            reasons.append((ctx.signal.reason, time.monotonic()))

    rig.registry.register("export", long)
    heartbeat_ms = 300
    runner = rig.runner(lease_ms=3_000, heartbeat_ms=heartbeat_ms)
    job_id = await rig.queue.enqueue("export")
    await asyncio.wait_for(started.wait(), 5)
    cancelled_at = time.monotonic()
    assert await rig.queue.cancel(job_id or "")
    await wait_until(lambda: bool(reasons), message="the handler interrupted")
    reason, interrupted_at = reasons[0]
    assert reason == "cancelled"
    assert interrupted_at - cancelled_at <= heartbeat_ms / 1000 + 0.2  # slack: a shared CPU
    await wait_until(lambda: runner.in_flight == 0, message="the attempt ended")
    assert await rig.state(job_id) == "cancelled"
    assert (runner.stats["completed"], runner.stats["cancelled"], runner.stats["lease_lost"]) == (
        0,
        1,
        0,
    )


async def test_a_reclaim_past_the_handlers_max_attempts_fails_without_running() -> None:
    """The producer stored the default 3 attempts; under a deploy whose handler allowed them,
    attempt 1 failed and the worker running attempt 2 died; the handler now allows 1: the
    reclaim of attempt 2 fails unrun."""
    clock = ManualClock()
    rig = Rig(clock)
    ran: list[int] = []

    async def once(payload: Any, ctx: JobContext) -> None:
        ran.append(ctx.attempt)

    job_id = await rig.queue.enqueue("charge")
    assert job_id is not None
    [first] = await rig.driver.claim(1, 1_000, ["charge"])
    assert await rig.driver.retry(job_id, first.lease_token, delay_ms=0, error="RuntimeError: x")
    dead = await rig.driver.claim(1, 1_000, ["charge"])  # the worker that was SIGKILLed
    assert [job.attempt for job in dead] == [2]
    clock.advance(1_000)
    rig.registry.register("charge", once, max_attempts=1)
    rig.runner()
    try:
        await rig.settled(job_id, "failed")
        info = await rig.driver.get_job(job_id)
        assert info is not None
        assert (info.attempts, info.stalls, ran) == (2, 1, [])
        assert info.last_error == (
            "PermanentError: attempt 2 is past the handler's max_attempts (1): not run"
        )
        # An operator's retry is one more attempt, and it runs.
        assert await rig.queue.retry(job_id)
        await rig.settled(job_id, "completed")
        assert ran == [3]
    finally:
        for runner in rig.runners:
            await runner.close()


async def test_a_worker_killed_on_the_last_attempt_costs_a_stall_not_the_job() -> None:
    """The handler allows 1 attempt; the worker holding it died: the reclaim runs attempt 1
    again (a stall), and the job completes."""
    clock = ManualClock()
    rig = Rig(clock)
    ran: list[tuple[int, int]] = []

    async def once(payload: Any, ctx: JobContext) -> None:
        ran.append((ctx.attempt, ctx.max_attempts))

    job_id = await rig.queue.enqueue("charge")
    assert job_id is not None
    dead = await rig.driver.claim(1, 1_000, ["charge"])  # the worker that was SIGKILLed
    assert [job.attempt for job in dead] == [1]
    clock.advance(1_000)
    rig.registry.register("charge", once, max_attempts=1)
    rig.runner()
    try:
        await rig.settled(job_id, "completed")
        info = await rig.driver.get_job(job_id)
        assert info is not None
        assert (info.attempts, info.stalls, info.last_error, ran) == (1, 1, None, [(1, 1)])
    finally:
        for runner in rig.runners:
            await runner.close()


async def test_a_started_runner_is_a_live_worker_until_it_closes(rig: Rig) -> None:
    gate = asyncio.Event()

    async def wait(payload: Any) -> None:
        await gate.wait()

    rig.registry.register("b", wait)
    rig.registry.register("a", wait)
    assert await rig.queue.workers() == []
    runner = rig.runner(concurrency=4, lease_ms=600, heartbeat_ms=100)
    await wait_until(lambda: _listed(rig), message="the worker registered")
    (worker,) = await rig.queue.workers()
    assert (worker.id, worker.pid, worker.types, worker.concurrency) == (
        runner.worker_id,
        os.getpid(),
        ("a", "b"),
        4,
    )
    await rig.queue.enqueue("a")

    async def busy() -> bool:
        workers = await rig.queue.workers()
        return bool(workers) and workers[0].in_flight == 1

    await wait_until(busy, message="in_flight refreshed")
    gate.set()
    await runner.close()
    assert await rig.queue.workers() == []


async def test_a_worker_that_stops_refreshing_is_gone_after_three_heartbeats() -> None:
    clock = ManualClock()
    rig = Rig(clock)
    runner = rig.runner(lease_ms=3_000, heartbeat_ms=1_000)
    try:
        await wait_until(lambda: _listed(rig), message="the worker registered")
        await runner.presence.expire()  # as a stalled or killed process would
        clock.advance(2_999)
        assert [w.id for w in await rig.queue.workers()] == [runner.worker_id]
        clock.advance(1)
        assert await rig.queue.workers() == []
    finally:
        await runner.close()


async def _listed(rig: Rig) -> bool:
    return bool(await rig.queue.workers())
