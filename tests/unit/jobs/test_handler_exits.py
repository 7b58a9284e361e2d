"""A handler cannot kill or strand the worker: whatever it raises, ``BaseException`` included,
is its attempt's error (SystemExit and KeyboardInterrupt for good), and the runner goes on;
only a cancellation of the attempt by the runner is an interruption or a shutdown."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest

from jobs import InProcessJobDriver, JobHandlerRegistry, JobInfo, JobQueue, JobRunner, JobsSettings
from tests.support import captured_logs, wait_until


def _raiser(error: Callable[[], BaseException], *, sync: bool) -> Callable[[Any], Any]:
    if sync:

        def in_thread(payload: Any) -> None:
            raise error()

        return in_thread

    async def on_loop(payload: Any) -> None:
        await asyncio.sleep(0)
        raise error()

    return on_loop


def _exit() -> BaseException:
    try:
        sys.exit(3)
    except SystemExit as exc:
        return exc


async def _run_beside_a_healthy_job(
    handler: Callable[[Any], Any], final_state: str
) -> tuple[JobInfo, list[dict[str, Any]]]:
    """Run the job of ``handler`` and, beside it, one of a healthy handler; wait for the
    first to reach ``final_state`` and the healthy one to complete, then one more job after
    it (the runner still serves). The bad job's info and the error-level-and-up logs."""
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("bad", handler, max_attempts=3)
    done: list[str] = []

    async def healthy(payload: Any) -> None:
        await asyncio.sleep(0.01)
        done.append(payload["n"])

    registry.register("good", healthy)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=4))
    queue = JobQueue(driver)
    with captured_logs("WARNING") as records:
        bad = await queue.enqueue("bad", {})
        await queue.enqueue("good", {"n": "beside"})
        runner.start()
        try:
            assert bad is not None
            await wait_until(lambda: _in(driver, bad, final_state), message=final_state)
            await wait_until(lambda: done == ["beside"], message="the job beside it completed")
            await queue.enqueue("good", {"n": "after"})
            await wait_until(lambda: done == ["beside", "after"], message="a job after it")
            assert runner.is_running
            assert runner.health().loops["claim"].alive
        finally:
            await runner.close()
    info = await driver.get_job(bad)
    assert info is not None
    return info, [r for r in records if "bad" in r["message"]]


async def _in(driver: InProcessJobDriver, job_id: str, state: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == state


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize(
    ("error", "name"),
    [(_exit, "SystemExit(3)"), (KeyboardInterrupt, "KeyboardInterrupt()")],
    ids=["sys.exit", "KeyboardInterrupt"],
)
async def test_system_exit_and_keyboard_interrupt_fail_their_job_for_good(
    error: Callable[[], BaseException], name: str, sync: bool
) -> None:
    info, logs = await _run_beside_a_healthy_job(_raiser(error, sync=sync), "failed")
    assert info.attempts == 1  # for good: no retry, though max_attempts is 3
    assert info.last_error is not None
    assert info.last_error.startswith(
        f"HandlerExitError: the handler raised {name}: a handler cannot exit the worker; its "
        "job fails for good and the worker keeps running"
    )
    assert [r["level"] for r in logs] == ["ERROR"]  # logged once


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize(
    "error", [asyncio.CancelledError, GeneratorExit], ids=["CancelledError", "GeneratorExit"]
)
async def test_a_cancelled_error_or_generator_exit_of_the_handler_own_is_a_retryable_error(
    error: Callable[[], BaseException], sync: bool
) -> None:
    """Not a shutdown: the job is not stranded until its lease ends, it is retried."""
    info, logs = await _run_beside_a_healthy_job(_raiser(error, sync=sync), "pending")
    assert info.attempts == 1
    assert info.last_error is not None
    assert info.last_error.startswith(f"{error.__name__}")  # type: ignore[attr-defined]
    assert [r["level"] for r in logs] == ["WARNING"]  # the retry, logged once


async def test_a_handler_that_raises_cancelled_error_again_after_its_timeout_times_out() -> None:
    """The runner's own cancellation stays the runner's, however the handler re-raises it."""

    async def slow(payload: Any) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise asyncio.CancelledError("mine now") from None

    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("t", slow, max_attempts=1, timeout_ms=50)
    runner = JobRunner(driver, registry)
    job_id = await JobQueue(driver).enqueue("t")
    assert job_id is not None
    runner.start()
    try:
        await wait_until(lambda: _in(driver, job_id, "failed"))
    finally:
        await runner.close()
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.last_error is not None
    assert info.last_error.startswith("JobTimeoutError")
