"""Every handler shape runs its body: registration decides by the call's real shape, and the
runner awaits an awaitable that a sync-path call returned, on its loop, saying so once."""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any

import pytest

from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner, JobsSettings
from jobs.handlers import calls_coroutine_function
from jobs.testing.handler_shapes import ASYNC_SHAPES, SHAPES, Ran
from tests.support import captured_logs, wait_until


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_registration_runs_on_the_loop_exactly_the_shapes_whose_call_is_a_coroutine_function(
    shape: str,
) -> None:
    ran: Ran = []
    handler = JobHandlerRegistry().register("t", SHAPES[shape](ran))
    assert handler.is_async is (shape in ASYNC_SHAPES)


def test_a_class_with_an_async_call_is_not_itself_a_coroutine_function() -> None:
    class Handler:
        async def __call__(self, payload: Any) -> None: ...

    assert calls_coroutine_function(Handler())
    assert not calls_coroutine_function(Handler)  # calling the class makes an instance
    assert calls_coroutine_function(functools.partial(functools.partial(Handler()), None))
    assert not calls_coroutine_function(print)


async def _run_one(handler: Any, job_type: str = "t") -> tuple[InProcessJobDriver, str]:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register(job_type, handler)
    runner = JobRunner(driver, registry, JobsSettings())
    job_id = await JobQueue(driver).enqueue(job_type, {"id": job_type})
    assert job_id is not None
    runner.start()
    try:
        await wait_until(lambda: _state(driver, job_id, "completed"), message="completed")
    finally:
        await runner.close()
    return driver, job_id


async def _state(driver: InProcessJobDriver, job_id: str, state: str) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == state


async def test_a_sync_handler_returning_a_coroutine_has_it_awaited_on_the_runner_loop() -> None:
    in_thread: list[str] = []
    body_thread: list[str] = []

    async def body(payload: Any) -> None:
        await asyncio.sleep(0)  # a real await: the coroutine runs on a loop
        body_thread.append(threading.current_thread().name)

    def handler(payload: Any) -> Any:
        in_thread.append(threading.current_thread().name)
        return body(payload)

    await _run_one(handler)
    assert in_thread[0].startswith("jobs-handler")  # the call itself: a worker thread
    assert body_thread == [threading.current_thread().name]  # its coroutine: the loop


async def test_the_hint_about_an_awaitable_result_is_logged_once_per_handler() -> None:
    ran: Ran = []
    handler = SHAPES["sync_returning_coroutine"](ran)
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()
    registry.register("hinted", handler)  # the conformance suite may have run this shape
    runner = JobRunner(driver, registry, JobsSettings())
    queue = JobQueue(driver)
    with captured_logs("INFO") as records:
        ids = [await queue.enqueue("hinted", {"id": str(n)}) for n in range(3)]
        runner.start()
        try:
            for job_id in ids:
                assert job_id is not None
                await wait_until(lambda j=job_id: _state(driver, j, "completed"))
        finally:
            await runner.close()
    hints = [r for r in records if "returned an awaitable" in r["message"]]
    assert len(hints) == 1, hints
    assert "hinted" in hints[0]["message"]
    assert sorted(payload_id for payload_id, _ in ran) == ["0", "1", "2"]


async def test_an_async_handler_returning_a_result_that_is_not_awaitable_completes() -> None:
    async def handler(payload: Any) -> dict[str, int]:
        return {"pages": 3}

    await _run_one(handler)
