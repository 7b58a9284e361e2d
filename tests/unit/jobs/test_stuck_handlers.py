"""The default timeout, and handlers stuck past theirs: ``health()`` names them (job id and
type) and their slot stays busy until they return."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import pytest

from jobs import (
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
)
from jobs.settings import DEFAULT_TIMEOUT_MS
from tests.support import wait_until

FAST = {"lease_ms": 300, "heartbeat_ms": 60}  # a sweep every 30 ms


def _runner(handler: Any, *, timeout_ms: int | None = None, **settings: Any) -> JobRunner:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("t", handler, max_attempts=1, timeout_ms=timeout_ms)
    return JobRunner(driver, registry, JobsSettings(**{**FAST, **settings}))


async def _enqueue(runner: JobRunner, **options: Any) -> str:
    job_id = await JobQueue(runner.driver).enqueue("t", {}, **options)
    assert job_id is not None
    return job_id


async def _error_once(runner: JobRunner, job_id: str, state: str = "failed") -> str | None:
    async def reached() -> bool:
        info = await runner.driver.get_job(job_id)
        return info is not None and info.state == state

    await wait_until(reached, timeout=5, message=state)
    info = await runner.driver.get_job(job_id)
    assert info is not None
    return info.last_error


def test_the_default_timeout_is_thirty_minutes_and_none_opts_out() -> None:
    assert JobsSettings().default_timeout_ms == DEFAULT_TIMEOUT_MS == 1_800_000
    assert JobsSettings(default_timeout_ms=None).default_timeout_ms is None
    with pytest.raises(ValueError, match="default_timeout_ms must be positive"):
        JobsSettings(default_timeout_ms=0)


async def test_a_handler_without_a_timeout_of_its_own_times_out_at_the_default() -> None:
    async def forever(payload: Any) -> None:
        await asyncio.Event().wait()

    runner = _runner(forever, default_timeout_ms=100)
    job_id = await _enqueue(runner)
    runner.start()
    try:
        started = time.monotonic()
        error = await _error_once(runner, job_id)
        assert 0.1 <= time.monotonic() - started < 1.0  # at most a sweep late
        assert error is not None
        assert error.startswith("JobTimeoutError: job 't' timed out after 100")
    finally:
        await runner.close()


@pytest.mark.parametrize(
    ("handler_ms", "request_ms", "default_ms", "expected_ms"),
    [(80, 60_000, 60_000, 80), (None, 80, 60_000, 80), (None, None, 80, 80)],
    ids=["handler-wins", "then-request", "then-default"],
)
async def test_the_timeout_is_the_handler_option_then_the_request_then_the_default(
    handler_ms: int | None, request_ms: int | None, default_ms: int, expected_ms: int
) -> None:
    async def forever(payload: Any) -> None:
        await asyncio.Event().wait()

    runner = _runner(forever, timeout_ms=handler_ms, default_timeout_ms=default_ms)
    job_id = await _enqueue(runner, timeout_ms=request_ms)
    runner.start()
    try:
        error = await _error_once(runner, job_id)
        assert error is not None
        assert f"timed out after {expected_ms} ms" in error
    finally:
        await runner.close()


async def test_no_default_timeout_lets_a_long_handler_finish() -> None:
    async def slow(payload: Any) -> None:
        await asyncio.sleep(0.3)

    runner = _runner(slow, default_timeout_ms=None)
    job_id = await _enqueue(runner)
    runner.start()
    try:
        assert await _error_once(runner, job_id, "completed") is None
    finally:
        await runner.close()


async def test_a_sync_handler_that_ignores_its_timeout_keeps_its_slot_and_health_names_it() -> None:
    release = threading.Event()
    ran: list[str] = []

    def blocks(payload: Any, ctx: JobContext) -> None:
        ran.append(ctx.id)
        if len(ran) == 1:
            release.wait(10)  # ignores ctx.signal

    runner = _runner(blocks, timeout_ms=50, concurrency=1, prefetch=0, timeout_grace_ms=100)
    first = await _enqueue(runner)
    runner.start()
    try:
        error = await _error_once(runner, first)  # settled at its timeout, its thread runs on
        assert error is not None
        assert error.startswith("JobTimeoutError")
        second = await _enqueue(runner)
        await wait_until(lambda: not runner.health().healthy, message="red")
        health = runner.health()
        (reason,) = health.reasons
        assert reason.startswith(f"job {first} (t): its handler ignored its interruption (timeout)")
        assert "in a worker thread" in reason
        assert health.stuck_handlers == 1
        assert runner.running_handlers == 1  # the thread still holds the only slot
        await asyncio.sleep(0.2)
        assert ran == [first]  # so the next job waits for it
        assert (await runner.driver.get_job(second)).state == "pending"  # type: ignore[union-attr]
        release.set()
        assert await _error_once(runner, second, "completed") is None
        await wait_until(lambda: runner.health().healthy, message="healthy again")
        assert runner.health().stuck_handlers == 0
    finally:
        release.set()
        await runner.close()


async def test_an_async_handler_that_swallows_its_cancellation_is_named_until_it_returns() -> None:
    finish = asyncio.Event()

    async def stubborn(payload: Any) -> None:
        while not finish.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await finish.wait()

    runner = _runner(stubborn, timeout_ms=50, timeout_grace_ms=100)
    job_id = await _enqueue(runner)
    runner.start()
    try:
        await _error_once(runner, job_id)
        await wait_until(lambda: not runner.health().healthy, message="red")
        (reason,) = runner.health().reasons
        assert reason.startswith(f"job {job_id} (t): its handler ignored its interruption")
        assert "on the event loop" in reason
        assert runner.running_handlers == 1
        finish.set()
        await wait_until(lambda: runner.running_handlers == 0, message="the slot freed")
        assert runner.health().healthy
    finally:
        finish.set()
        await runner.close()


async def test_a_handler_blocking_the_loop_past_its_timeout_is_named_by_health() -> None:
    """Its timer cannot fire while the loop is blocked; health() read from another thread
    (a watchdog's) sees the handler past its timeout and the grace period."""
    seen: list[tuple[bool, tuple[str, ...]]] = []
    runner: JobRunner

    def watchdog() -> None:
        time.sleep(0.35)
        health = runner.health()
        seen.append((health.healthy, health.reasons))

    async def blocks_the_loop(payload: Any) -> None:
        thread = threading.Thread(target=watchdog)
        thread.start()
        time.sleep(0.5)  # noqa: ASYNC251 - blocking the loop is the case tested
        thread.join()

    runner = _runner(blocks_the_loop, timeout_ms=50, timeout_grace_ms=100)
    job_id = await _enqueue(runner)
    runner.start()
    try:
        await _error_once(runner, job_id, "completed")  # it returned before its timer could run
    finally:
        await runner.close()
    ((healthy, reasons),) = seen
    assert not healthy
    assert any(
        r.startswith(f"job {job_id} (t): its handler has run") and "past its timeout of 50 ms" in r
        for r in reasons
    ), reasons
