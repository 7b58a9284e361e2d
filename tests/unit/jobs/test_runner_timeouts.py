"""Timeouts, stop, close and drain."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from jobs import (
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsError,
    JobsSettings,
)
from tests.support import wait_until


async def state_of(driver: InProcessJobDriver, job_id: str | None) -> tuple[str, int, str | None]:
    assert job_id is not None
    info = await driver.get_job(job_id)
    assert info is not None
    return info.state, info.attempts, info.last_error


def runner_for(handler: Any, **settings: Any) -> tuple[InProcessJobDriver, JobRunner]:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("t", handler, max_attempts=1)
    return driver, JobRunner(driver, registry, JobsSettings(**settings))


async def test_a_timeout_cancels_the_handler_and_sets_its_signal() -> None:
    seen: list[tuple[bool, str | None]] = []

    async def slow(payload: Any, ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append((ctx.signal.is_set(), ctx.signal.reason))
            raise

    driver, runner = runner_for(slow)
    job_id = await JobQueue(driver).enqueue("t", timeout_ms=100)
    runner.start()
    await wait_until(lambda: _is(driver, job_id, "failed"))
    _, attempts, error = await state_of(driver, job_id)
    assert attempts == 1
    assert error is not None
    assert error.startswith("JobTimeoutError: job 't' timed out after 100 ms")
    assert seen == [(True, "timeout")]
    await runner.close()


async def _is(driver: InProcessJobDriver, job_id: str | None, state: str) -> bool:
    return (await state_of(driver, job_id))[0] == state


async def test_a_handler_that_swallows_cancellation_is_settled_anyway() -> None:
    finish = asyncio.Event()
    swallowed = 0

    async def stubborn(payload: Any, ctx: JobContext) -> None:
        nonlocal swallowed
        while not finish.is_set():
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed += 1

    driver, runner = runner_for(stubborn, timeout_grace_ms=200)
    job_id = await JobQueue(driver).enqueue("t", timeout_ms=100)
    started = time.monotonic()
    runner.start()
    try:
        await wait_until(lambda: _is(driver, job_id, "failed"), timeout=3)
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 1.5
        assert swallowed >= 1  # cancelled at the timeout (and again when abandoned)
        assert runner.stats["abandoned"] == 1
        await wait_until(lambda: runner.in_flight == 0, message="settled: nothing in flight")
        _, _, error = await state_of(driver, job_id)
        assert error is not None
        assert error.startswith("JobTimeoutError")
    finally:
        finish.set()
        await runner.close()


async def test_a_blocking_sync_handler_is_settled_at_its_timeout() -> None:
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def blocks(payload: Any, ctx: JobContext) -> None:
        ctx.signal.wait_blocking(5)  # a thread cannot be cancelled; it sees the signal

    driver, runner = runner_for(blocks)
    job_id = await JobQueue(driver).enqueue("t", timeout_ms=100)
    runner.start()
    await wait_until(lambda: _is(driver, job_id, "failed"), timeout=3)
    release.set()
    assert loop.is_running()
    await runner.close()


async def test_a_handler_timeout_option_overrides_the_request() -> None:
    async def slow(payload: Any) -> None:
        await asyncio.sleep(30)

    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("t", slow, max_attempts=1, timeout_ms=50)
    runner = JobRunner(driver, registry)
    job_id = await JobQueue(driver).enqueue("t", timeout_ms=60_000)
    runner.start()
    await wait_until(lambda: _is(driver, job_id, "failed"), timeout=3)
    _, _, error = await state_of(driver, job_id)
    assert error is not None
    assert "timed out after 50 ms" in error
    await runner.close()


async def test_stop_ends_claiming_while_jobs_in_flight_go_on() -> None:
    gate = asyncio.Event()
    started = asyncio.Event()

    async def gated(payload: Any) -> None:
        started.set()
        await gate.wait()

    driver, runner = runner_for(gated)
    queue = JobQueue(driver)
    first = await queue.enqueue("t")
    runner.start()
    await asyncio.wait_for(started.wait(), 5)
    runner.stop()
    assert not runner.is_running
    second = await queue.enqueue("t")
    gate.set()
    await wait_until(lambda: _is(driver, first, "completed"))
    assert (await state_of(driver, second))[:2] == ("pending", 0)
    await runner.close()
    assert (await state_of(driver, second))[:2] == ("pending", 0)


async def test_close_drains_jobs_in_flight() -> None:
    gate = asyncio.Event()

    async def gated(payload: Any) -> None:
        await gate.wait()

    driver, runner = runner_for(gated, concurrency=5)
    queue = JobQueue(driver)
    ids = [await queue.enqueue("t") for _ in range(3)]
    runner.start()
    await wait_until(lambda: runner.in_flight == 3)
    closing = asyncio.create_task(runner.close())
    await asyncio.sleep(0.05)
    assert not closing.done()
    queued_late = await queue.enqueue("t")
    gate.set()
    await asyncio.wait_for(closing, 5)
    for job_id in ids:
        assert (await state_of(driver, job_id))[:2] == ("completed", 1)
    assert (await state_of(driver, queued_late))[:2] == ("pending", 0)


async def test_a_drain_deadline_hands_unfinished_jobs_back_at_no_cost() -> None:
    async def forever(payload: Any) -> None:
        await asyncio.Event().wait()

    driver, runner = runner_for(forever)
    job_id = await JobQueue(driver).enqueue("t")
    runner.start()
    await wait_until(lambda: runner.in_flight == 1)
    started = time.monotonic()
    await runner.close(drain_timeout_ms=100)
    assert time.monotonic() - started < 1.0
    assert (await state_of(driver, job_id))[:2] == ("pending", 0)  # released, due at once
    assert runner.in_flight == 0


async def test_start_and_stop_are_idempotent_and_close_is_final() -> None:
    async def noop(payload: Any) -> None: ...

    _, runner = runner_for(noop)
    runner.start()
    runner.start()
    assert runner.is_running
    runner.stop()
    runner.stop()
    assert not runner.is_running
    runner.start()
    assert runner.is_running
    await runner.close()
    await runner.close()
    with pytest.raises(JobsError, match="closed"):
        runner.start()
